//! A job whose asker stopped waiting stops on the compression agent: its model call ends
//! unanswered and its worker takes the next job, instead of summarizing for nobody (an agent
//! that made room at its limit drops the job it worked ahead; an ask times out).

use std::time::Duration;

use troupe_agents::compression::{COMPRESSION_AGENT, CompressorJob};
use troupe_protocol::TraceContext;

use super::support::schedule::{GateModel, PATIENCE, compact, next_start, request, starts, team};

#[tokio::test]
async fn a_job_whose_asker_stopped_waiting_stops_and_frees_its_worker() {
    // One worker; the first agent's compaction is held in its model call for good.
    let (model, log, mut started, _gates) = GateModel::new(&["ahead"]);
    let team = team(model, 1).await;
    let directory = team.directory().clone();
    let asking = tokio::spawn(async move {
        directory
            .ask_job(
                COMPRESSION_AGENT,
                |reply| CompressorJob::Compact(Box::new(request("ahead", 5)), reply),
                TraceContext::new_root(),
                Duration::from_secs(3600),
            )
            .await
    });
    assert_eq!(next_start(&mut started).await, "ahead");
    // The asker gives up while the job runs.
    asking.abort();
    let _ = asking.await;
    // The one worker is free again: the next agent's compaction runs and is answered, though
    // the first one's model call was never let through.
    let next = tokio::time::timeout(PATIENCE, compact(team.directory(), request("next", 5)))
        .await
        .expect("the abandoned job still held the only worker");
    assert!(next.unwrap().changed());
    assert_eq!(starts(&log), ["ahead", "next"]);
    assert!(
        !log.lock().unwrap().iter().any(|e| e == "end:ahead"),
        "the abandoned call was let through"
    );
    team.shutdown().await;
}
