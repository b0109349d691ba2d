//! The summarizer `--model` asks for.

use std::sync::Arc;

use anyhow::Context as _;
use troupe::agents::compression::ModelSummarizer;
use troupe::compaction::{MechanicalSummarizer, Summarizer};

use crate::cli::SummaryModel;

/// The summarizer for `choice`; loading the local model may download it once.
pub async fn summarizer(choice: SummaryModel) -> anyhow::Result<Arc<dyn Summarizer>> {
    Ok(match choice {
        SummaryModel::None => Arc::new(MechanicalSummarizer::new()),
        SummaryModel::Local => {
            let spinner = crate::progress::spinner("loading the local model");
            let model = troupe::agents::model::LocalModel::load_default()
                .await
                .context("loading the local model (use --model none to summarize without one)")?;
            spinner.finish_and_clear();
            Arc::new(ModelSummarizer::new(Arc::new(model)))
        }
        SummaryModel::Openai => {
            let model = troupe::agents::model::OpenAiModel::from_env()
                .context("OpenAI-compatible model from OPENAI_API_KEY / OPENAI_BASE_URL")?;
            Arc::new(ModelSummarizer::new(Arc::new(model)))
        }
    })
}
