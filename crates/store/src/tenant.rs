//! Tenants: who owns a stored object, and whose objects a store call may see.
//!
//! Every row of a stored object (response, response item, conversation, conversation item,
//! request capture) carries the name of the tenant that wrote it, and every query made for a
//! request filters by it in the SQL itself: there is no fetch-then-check anywhere. A tenant
//! that is not the owner finds nothing, so the gateway answers 404 and existence does not leak.
//!
//! The open gateway (no keys) is one tenant whose name is the empty string; rows written
//! before tenants existed were migrated to it, so they stay readable by an open gateway and by
//! an admin, and by nobody else. A key's tenant is never empty (the gateway checks it).
//!
//! An admin tenant *reads* across tenants (for support): `get`, item pages, chains, item
//! references, conversations. It writes, deletes and cancels only as itself.
//!
//! Not here: which key belongs to which tenant (the gateway's config and key scopes).

/// The tenant a store call acts for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tenant {
    name: String,
    reads_all: bool,
}

impl Tenant {
    /// The open gateway's tenant (no keys): rows owned by no key.
    pub fn open() -> Self {
        Self {
            name: String::new(),
            reads_all: false,
        }
    }

    /// A named tenant: a key's own, or the `tenant` several keys share.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            reads_all: false,
        }
    }

    /// The same tenant, reading across every tenant (an admin key).
    pub fn reading_all(mut self) -> Self {
        self.reads_all = true;
        self
    }

    /// The same tenant seeing only its own objects: what a write, delete or cancel acts on,
    /// even for an admin.
    pub fn own(&self) -> Self {
        Self::named(self.name.clone())
    }

    /// The owner written on rows (`""` for the open gateway).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True when reads are not filtered (an admin).
    pub fn reads_all(&self) -> bool {
        self.reads_all
    }

    /// `1` when reads are not filtered, bound into `(tenant = $n OR $m = 1)`.
    pub(crate) fn all_flag(&self) -> i64 {
        i64::from(self.reads_all)
    }
}
