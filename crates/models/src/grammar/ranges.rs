//! Repetition and integer-range rules, ported from llama.cpp's `build_repetition` and
//! `build_min_max_int`: `{"minimum": 1, "maximum": 300}` becomes digit ranges (`[1-9] | ... |
//! "300"`), so the model cannot write an integer out of range.

use super::SchemaGrammarError;

/// `item` repeated `min..=max` times (`max == i32::MAX`: unbounded), `separator` between items.
pub(super) fn repetition(item: &str, min: i32, max: i32, separator: &str) -> String {
    let has_max = max != i32::MAX;
    if max == 0 {
        return String::new();
    }
    if min == 0 && max == 1 {
        return format!("{item}?");
    }
    if separator.is_empty() {
        if min == 1 && !has_max {
            return format!("{item}+");
        }
        if min == 0 && !has_max {
            return format!("{item}*");
        }
        let upper = if has_max {
            max.to_string()
        } else {
            String::new()
        };
        return format!("{item}{{{min},{upper}}}");
    }
    let rest = repetition(
        &format!("({separator} {item})"),
        if min == 0 { 0 } else { min.wrapping_sub(1) },
        if has_max { max.wrapping_sub(1) } else { max },
        "",
    );
    let result = format!("{item} {rest}");
    if min == 0 {
        format!("({result})?")
    } else {
        result
    }
}

/// The digits of an integer in `min..=max` (`i64::MIN` / `i64::MAX`: no bound), appended to
/// `out`; an error when neither bound is set (llama.cpp throws there).
pub(super) fn min_max_int(min: i64, max: i64, out: &mut String) -> Result<(), SchemaGrammarError> {
    build(min, max, out, 16, true)
}

fn digit_range(out: &mut String, from: u8, to: u8) {
    out.push('[');
    out.push(from as char);
    if from != to {
        out.push('-');
        out.push(to as char);
    }
    out.push(']');
}

fn more_digits(out: &mut String, min_digits: i32, max_digits: i32) {
    out.push_str("[0-9]");
    if min_digits == max_digits && min_digits == 1 {
        return;
    }
    out.push('{');
    out.push_str(&min_digits.to_string());
    if max_digits != min_digits {
        out.push(',');
        if max_digits != i32::MAX {
            out.push_str(&max_digits.to_string());
        }
    }
    out.push('}');
}

/// Every digit string of `from`'s length between `from` and `to`.
fn uniform_range(out: &mut String, from: &[u8], to: &[u8]) {
    let mut i = 0;
    while i < from.len() && i < to.len() && from[i] == to[i] {
        i += 1;
    }
    if i > 0 {
        out.push('"');
        out.push_str(&String::from_utf8_lossy(&from[..i]));
        out.push('"');
    }
    if i < from.len() && i < to.len() {
        if i > 0 {
            out.push(' ');
        }
        let sub_len = from.len() - i - 1;
        if sub_len > 0 {
            let from_sub = &from[i + 1..];
            let to_sub = &to[i + 1..];
            let sub_zeros = "0".repeat(sub_len);
            let sub_nines = "9".repeat(sub_len);
            let mut to_reached = false;
            out.push('(');
            if from_sub == sub_zeros.as_bytes() {
                digit_range(out, from[i], to[i].wrapping_sub(1));
                out.push(' ');
                more_digits(out, sub_len as i32, sub_len as i32);
            } else {
                out.push('[');
                out.push(from[i] as char);
                out.push_str("] (");
                uniform_range(out, from_sub, sub_nines.as_bytes());
                out.push(')');
                if from[i] < to[i].wrapping_sub(1) {
                    out.push_str(" | ");
                    if to_sub == sub_nines.as_bytes() {
                        digit_range(out, from[i] + 1, to[i]);
                        to_reached = true;
                    } else {
                        digit_range(out, from[i] + 1, to[i].wrapping_sub(1));
                    }
                    out.push(' ');
                    more_digits(out, sub_len as i32, sub_len as i32);
                }
            }
            if !to_reached {
                out.push_str(" | ");
                digit_range(out, to[i], to[i]);
                out.push(' ');
                uniform_range(out, sub_zeros.as_bytes(), to_sub);
            }
            out.push(')');
        } else {
            out.push('[');
            out.push(from[i] as char);
            out.push('-');
            out.push(to[i] as char);
            out.push(']');
        }
    }
}

fn build(
    mut min: i64,
    max: i64,
    out: &mut String,
    decimals_left: i32,
    top_level: bool,
) -> Result<(), SchemaGrammarError> {
    let has_min = min != i64::MIN;
    let has_max = max != i64::MAX;

    if has_min && has_max {
        if min < 0 && max < 0 {
            out.push_str("\"-\" (");
            build(
                max.wrapping_neg(),
                min.wrapping_neg(),
                out,
                decimals_left,
                true,
            )?;
            out.push(')');
            return Ok(());
        }
        if min < 0 {
            out.push_str("\"-\" (");
            build(0, min.wrapping_neg(), out, decimals_left, true)?;
            out.push_str(") | ");
            min = 0;
        }
        let mut min_s = min.to_string();
        let max_s = max.to_string();
        for digits in min_s.len()..max_s.len() {
            uniform_range(out, min_s.as_bytes(), "9".repeat(digits).as_bytes());
            min_s = format!("1{}", "0".repeat(digits));
            out.push_str(" | ");
        }
        uniform_range(out, min_s.as_bytes(), max_s.as_bytes());
        return Ok(());
    }

    let less_decimals = (decimals_left - 1).max(1);

    if has_min {
        if min < 0 {
            out.push_str("\"-\" (");
            build(i64::MIN, min.wrapping_neg(), out, decimals_left, false)?;
            out.push_str(") | [0] | [1-9] ");
            more_digits(out, 0, decimals_left - 1);
        } else if min == 0 {
            if top_level {
                out.push_str("[0] | [1-9] ");
                more_digits(out, 0, less_decimals);
            } else {
                more_digits(out, 1, decimals_left);
            }
        } else if min <= 9 {
            let c = b'0' + min as u8;
            let range_start = if top_level { b'1' } else { b'0' };
            if c > range_start {
                digit_range(out, range_start, c - 1);
                out.push(' ');
                more_digits(out, 1, less_decimals);
                out.push_str(" | ");
            }
            digit_range(out, c, b'9');
            out.push(' ');
            more_digits(out, 0, less_decimals);
        } else {
            let min_s = min.to_string();
            let len = min_s.len() as i32;
            let c = min_s.as_bytes()[0];
            if c > b'1' {
                digit_range(out, if top_level { b'1' } else { b'0' }, c - 1);
                out.push(' ');
                more_digits(out, len, less_decimals);
                out.push_str(" | ");
            }
            digit_range(out, c, c);
            out.push_str(" (");
            // The digits after the first, as `std::stoll` reads them ("05" is 5).
            let rest: i64 = min_s[1..].parse().unwrap_or(0);
            build(rest, i64::MAX, out, less_decimals, false)?;
            out.push(')');
            if c < b'9' {
                out.push_str(" | ");
                digit_range(out, c + 1, b'9');
                out.push(' ');
                more_digits(out, len - 1, less_decimals);
            }
        }
        return Ok(());
    }

    if has_max {
        if max >= 0 {
            if top_level {
                out.push_str("\"-\" [1-9] ");
                more_digits(out, 0, less_decimals);
                out.push_str(" | ");
            }
            build(0, max, out, decimals_left, true)?;
        } else {
            out.push_str("\"-\" (");
            build(max.wrapping_neg(), i64::MAX, out, decimals_left, false)?;
            out.push(')');
        }
        return Ok(());
    }

    Err(SchemaGrammarError::UnboundedIntegerRange)
}
