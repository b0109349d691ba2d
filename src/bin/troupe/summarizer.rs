//! The compaction model `--model` asks for.

use std::sync::Arc;

use anyhow::Context as _;
use troupe::protocol::ChatModel;

use crate::cli::SummaryModel;

/// The model the compression agent uses for `choice` (`None`: the planner and the mechanical
/// summarizer only); loading the local model may download it once.
pub async fn compaction_model(choice: SummaryModel) -> anyhow::Result<Option<Arc<dyn ChatModel>>> {
    Ok(match choice {
        SummaryModel::None => None,
        SummaryModel::Local => {
            let spinner = crate::progress::spinner("loading the local model");
            let model = troupe::models::LocalModel::load_default()
                .await
                .context("loading the local model (use --model none to summarize without one)")?;
            spinner.finish_and_clear();
            Some(Arc::new(model))
        }
        SummaryModel::Openai => {
            let model = troupe::models::OpenAiModel::from_env()
                .context("OpenAI-compatible model from OPENAI_API_KEY / OPENAI_BASE_URL")?;
            Some(Arc::new(model))
        }
    })
}
