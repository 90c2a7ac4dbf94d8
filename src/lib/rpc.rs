//! Small facts about gRPC statuses that every client in dpctl needs the same
//! way (the device-plugin client and the PodResources client).

/// True for a status that means the call's deadline passed:
/// `DeadlineExceeded`, or the `Cancelled: Timeout expired` a tonic server
/// answers when it enforces `grpc-timeout` itself.
pub fn is_deadline(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::DeadlineExceeded
        || (status.code() == tonic::Code::Cancelled && status.message().contains("Timeout expired"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_statuses_from_both_stacks() {
        assert!(is_deadline(&tonic::Status::deadline_exceeded("context deadline exceeded")));
        assert!(is_deadline(&tonic::Status::cancelled("Timeout expired")));
        assert!(!is_deadline(&tonic::Status::cancelled("the client went away")));
        assert!(!is_deadline(&tonic::Status::unavailable("Timeout expired")));
    }
}
