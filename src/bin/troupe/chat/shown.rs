//! What a streamed request prints: the model's text as it is generated, tool calls and compactions
//! as one-line notices (a background compaction quietly, once, when it lands) — everything from the model or a tool through [`super::terminal`].

use troupe::Event;
use troupe::protocol::CompactionMode;

use super::terminal::{StreamedText, safe};

/// What a streamed request has printed so far.
#[derive(Debug, Default)]
pub(super) struct Shown {
    /// The text of the current model call, as generated.
    text: String,
    /// The current model call's text on its way to the terminal.
    streamed: StreamedText,
    /// Whether the cursor is mid-line.
    mid_line: bool,
    /// A background compaction started in this request and has not finished.
    background: bool,
    /// Tokens before and after of a background compaction that finished and is not applied yet.
    landed: Option<(usize, usize)>,
}

impl Shown {
    pub(super) fn event(&mut self, event: &Event) {
        match event {
            Event::ModelCallStarted { .. } => {
                self.flush_text();
                self.text.clear();
            }
            Event::ModelDelta { text, .. } => {
                self.text.push_str(text);
                let out = self.streamed.push(text);
                self.print(&out);
            }
            Event::ToolCallStarted { tool, .. } => self.notice(&format!("[tool {}]", safe(tool))),
            // The request a restart left in flight, finished before this one (durable steps).
            Event::RequestResumed {
                answer: Some(answer),
                ..
            } => self.notice(&format!(
                "[the request in flight before the restart answered: {}]",
                safe(answer)
            )),
            Event::ToolCallFinished {
                tool,
                is_error: true,
                ..
            } => self.notice(&format!("[tool {} reported an error]", safe(tool))),
            // A compaction in the background holds nothing up: it is told once, when it lands.
            Event::CompactionStarted {
                mode: CompactionMode::Background,
                ..
            } => self.background = true,
            // The budget's words are ours (numbers); the chat asks for a raise after it.
            Event::BudgetPaused { exceeded, .. } => {
                self.notice(&format!("[paused: {exceeded}]"));
            }
            Event::CompactionStarted { tokens, .. } => {
                self.notice(&format!("[compacting {tokens} tokens…]"));
            }
            Event::CompactionFinished { report, .. } if self.background => {
                self.background = false;
                self.landed = Some((report.tokens_before, report.tokens_after));
            }
            Event::CompactionFinished { report, .. } => self.notice(&format!(
                "[compacted: {} → {} tokens ({})]",
                report.tokens_before,
                report.tokens_after,
                safe(&report.reason)
            )),
            Event::CompactionApplied {
                mode: CompactionMode::Background,
                applied,
                reason,
                ..
            } => {
                self.background = false;
                let line = match (applied, self.landed.take(), reason) {
                    (true, Some((before, after)), _) => {
                        format!("[compacted in the background: {before} → {after} tokens]")
                    }
                    (true, None, _) => "[compacted in the background]".to_string(),
                    (false, _, reason) => format!(
                        "[background compaction dropped: {}]",
                        safe(reason.as_deref().unwrap_or("no answer"))
                    ),
                };
                self.notice(&line);
            }
            _ => {}
        }
    }

    /// A line of its own (its text is the caller's, already safe).
    pub(super) fn notice(&mut self, line: &str) {
        self.flush_text();
        self.end_line();
        println!("{line}");
    }

    /// The answer is what the last model call streamed; print it only if it was not (a model
    /// that answered whole).
    pub(super) fn answer(&mut self, answer: &str) {
        self.flush_text();
        if self.text.trim() != answer.trim() {
            self.end_line();
            let out = safe(answer);
            self.print(&out);
        }
        self.end_line();
    }

    /// Print what the streamed text still holds back (the model call ended or was cut off).
    pub(super) fn flush_text(&mut self) {
        let out = self.streamed.finish();
        self.print(&out);
    }

    pub(super) fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    fn print(&mut self, out: &str) {
        if out.is_empty() {
            return;
        }
        print!("{out}");
        crate::out::flush_stdout();
        self.mid_line = !out.ends_with('\n');
    }
}
