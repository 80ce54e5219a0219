//! The c10d store's keys: the protocol a run's ranks share (the run id rank 0
//! chooses, each rank's placement, its heartbeat and its result). `worker`
//! writes and reads them, `liveness` watches them; neither owns the other.

/// The run id rank 0 chooses and every rank's telemetry is tagged with.
pub(crate) const RUN_ID: &str = "gpubench/run_id";

/// Where rank `rank` says which host, node and devices it runs on.
pub(crate) fn place(rank: usize) -> String {
    format!("gpubench/place/{rank}")
}

/// Rank `rank`'s heartbeat counter.
pub(crate) fn alive(rank: usize) -> String {
    format!("gpubench/alive/{rank}")
}

/// Where rank `rank` leaves its measurements for rank 0; a rank that has
/// left them is done, and no longer watched for loss.
pub(crate) fn result(rank: usize) -> String {
    format!("gpubench/result/{rank}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_rank_has_its_own_keys_under_one_prefix() {
        let keys = [super::place(3), super::alive(3), super::result(3), super::RUN_ID.to_string()];
        assert!(keys.iter().all(|k| k.starts_with("gpubench/")));
        assert_ne!(super::result(1), super::result(2));
        assert_eq!(keys.iter().collect::<std::collections::HashSet<_>>().len(), 4);
    }
}
