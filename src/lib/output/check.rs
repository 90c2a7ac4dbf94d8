//! Placeholder: renderers for its own issue.
