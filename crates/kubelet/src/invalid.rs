//! The one failure the kubelet logic reports: input it refuses (a release
//! name, a topology configuration). dpctl turns it into its own error type
//! (`Error::Invalid`, exit 2), so users see one style of error.

/// Input refused: where it came from and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct Invalid {
    /// Where: a flag, a file and key, a manifest field.
    pub place: String,
    /// What is wrong.
    pub message: String,
}

impl Invalid {
    /// Refuses the input at `place` for `message`.
    pub fn new(place: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid { place: place.into(), message: message.into() }
    }
}

/// A result whose failure is refused input.
pub type Result<T> = std::result::Result<T, Invalid>;
