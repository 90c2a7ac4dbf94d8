//! How the manager refuses a pod: the reason and the kubelet's message,
//! shared by the admission and Topology Manager transitions (a leaf, so
//! neither imports the other for it).

use crate::kubelet_sim::outcome::UNEXPECTED_ADMISSION_ERROR;

/// A rejection: reason and message as the kubelet reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    /// `UnexpectedAdmissionError`, `TopologyAffinityError`, `OutOf<resource>`.
    pub reason: String,
    /// The kubelet's text.
    pub message: String,
}

/// `UnexpectedAdmissionError` wrapping a device manager error.
pub(crate) fn unexpected(err: impl std::fmt::Display) -> Rejection {
    Rejection { reason: UNEXPECTED_ADMISSION_ERROR.into(), message: crate::kubelet_texts::WRAPPER.fill(&[&err]) }
}
