//! Small facts about gRPC statuses that every client in dpctl needs the same
//! way (the device-plugin client and the PodResources client), and the one
//! table of status-code names (config files and event records spell codes).

/// True for a status that means the call's deadline passed:
/// `DeadlineExceeded`, or the `Cancelled: Timeout expired` a tonic server
/// answers when it enforces `grpc-timeout` itself.
pub fn is_deadline(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::DeadlineExceeded
        || (status.code() == tonic::Code::Cancelled && status.message().contains("Timeout expired"))
}

/// Every gRPC status code with its snake_case name, in number order.
const CODES: [(tonic::Code, &str); 17] = [
    (tonic::Code::Ok, "ok"),
    (tonic::Code::Cancelled, "cancelled"),
    (tonic::Code::Unknown, "unknown"),
    (tonic::Code::InvalidArgument, "invalid_argument"),
    (tonic::Code::DeadlineExceeded, "deadline_exceeded"),
    (tonic::Code::NotFound, "not_found"),
    (tonic::Code::AlreadyExists, "already_exists"),
    (tonic::Code::PermissionDenied, "permission_denied"),
    (tonic::Code::ResourceExhausted, "resource_exhausted"),
    (tonic::Code::FailedPrecondition, "failed_precondition"),
    (tonic::Code::Aborted, "aborted"),
    (tonic::Code::OutOfRange, "out_of_range"),
    (tonic::Code::Unimplemented, "unimplemented"),
    (tonic::Code::Internal, "internal"),
    (tonic::Code::Unavailable, "unavailable"),
    (tonic::Code::DataLoss, "data_loss"),
    (tonic::Code::Unauthenticated, "unauthenticated"),
];

/// A gRPC code from its name (any case, `_`/`-` optional) or number.
pub fn parse_code(s: &str) -> std::result::Result<tonic::Code, String> {
    if let Ok(n) = s.parse::<i32>() {
        return match tonic::Code::from_i32(n) {
            tonic::Code::Unknown if n != 2 => Err(format!("no gRPC code {n} (0-16)")),
            c => Ok(c),
        };
    }
    let key: String = s.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_lowercase();
    CODES.iter().find(|(_, name)| name.replace('_', "") == key).map(|(c, _)| *c).ok_or_else(|| {
        format!("unknown gRPC code {s:?} (e.g. {})", CODES[1..].iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", "))
    })
}

/// The snake_case name of a gRPC code (`invalid_argument`).
pub fn code_name(code: tonic::Code) -> &'static str {
    CODES.iter().find(|(c, _)| *c == code).map_or("unknown", |(_, n)| n)
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

    #[test]
    fn every_code_round_trips_by_name_and_number() {
        for n in 0..=16 {
            let code = tonic::Code::from_i32(n);
            assert_eq!(parse_code(code_name(code)), Ok(code), "{n}");
            assert_eq!(parse_code(&n.to_string()), Ok(code));
        }
        assert_eq!(parse_code("Resource-Exhausted"), Ok(tonic::Code::ResourceExhausted));
        assert!(parse_code("17").is_err_and(|e| e.contains("0-16")));
        assert!(parse_code("oops").is_err_and(|e| e.contains("invalid_argument")));
    }
}
