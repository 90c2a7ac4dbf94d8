//! The resources the API server serves: the objects a DRA driver built on
//! the `kubeletplugin` helper reads (its Node, the claims it prepares, the
//! pods and device classes around them) and the ResourceSlices it
//! publishes, the one resource it writes. One version per group: `v1` of
//! the core group and of `resource.k8s.io` (GA since 1.34); the helper's
//! client falls back to v1beta2 and v1beta1 only on a 404.

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// API group ("" for the core group).
    pub group: &'static str,
    /// The one version served.
    pub version: &'static str,
    /// The URL's plural name.
    pub resource: &'static str,
    /// The object kind.
    pub kind: &'static str,
    /// Objects live in a namespace.
    pub namespaced: bool,
    /// Clients may create, update and delete: ResourceSlices (drivers
    /// publish them) and ResourceClaims (`dra check --kubeconfig` makes its
    /// own); the rest is the file's, read-only.
    pub writable: bool,
    /// Field selectors the real API server accepts for it, besides
    /// `metadata.name` (and `metadata.namespace` when namespaced).
    pub fields: &'static [&'static str],
}

/// The resource.k8s.io group.
pub const RESOURCE_GROUP: &str = "resource.k8s.io";

/// Every served resource.
pub const KINDS: &[Kind] = &[
    Kind {
        group: "",
        version: "v1",
        resource: "nodes",
        kind: "Node",
        namespaced: false,
        writable: false,
        fields: &["spec.unschedulable"],
    },
    Kind {
        group: "",
        version: "v1",
        resource: "pods",
        kind: "Pod",
        namespaced: true,
        writable: false,
        fields: &["spec.nodeName", "status.phase"],
    },
    Kind {
        group: RESOURCE_GROUP,
        version: "v1",
        resource: "resourceclaims",
        kind: "ResourceClaim",
        namespaced: true,
        writable: true,
        fields: &[],
    },
    Kind {
        group: RESOURCE_GROUP,
        version: "v1",
        resource: "resourceslices",
        kind: "ResourceSlice",
        namespaced: false,
        writable: true,
        fields: &["spec.nodeName", "spec.driver", "spec.pool.name"],
    },
    Kind {
        group: RESOURCE_GROUP,
        version: "v1",
        resource: "deviceclasses",
        kind: "DeviceClass",
        namespaced: false,
        writable: false,
        fields: &[],
    },
];

impl Kind {
    /// `apiVersion` of its objects: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `resource.group` as the API server names it in messages (`nodes` for core).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.resource.to_string() } else { format!("{}.{}", self.resource, self.group) }
    }

    /// The served resource for an object's `apiVersion` and `kind`.
    pub fn of_object(api_version: &str, kind: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.kind == kind && k.api_version() == api_version)
    }

    /// The served resource at a URL's group, version and plural.
    pub fn of_path(group: &str, version: &str, resource: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.group == group && k.version == version && k.resource == resource)
    }

    /// The resource Nodes are.
    pub fn nodes() -> &'static Kind {
        KINDS.iter().find(|k| k.resource == "nodes").expect("nodes is served")
    }

    /// The resource ResourceSlices are.
    pub fn slices() -> &'static Kind {
        KINDS.iter().find(|k| k.resource == "resourceslices").expect("resourceslices is served")
    }
}
