//! The metric handles cache: each label set's handles registered once, so a sample is a hash
//! and an atomic.

use std::hash::{Hash, Hasher};
use std::sync::{PoisonError, RwLock};

use hashbrown::{Equivalent, HashMap};

/// Metric handles by their label values, registered once: a sample then costs a hash of its
/// label values and an atomic update, instead of a key built (each label value copied) and
/// looked up in the recorder's registry on every sample. The label sets are bounded (see the
/// module documentation), and so is this map.
pub(super) struct Handles<const N: usize, H> {
    map: RwLock<Option<HashMap<LabelValues<N>, H>>>,
}

/// Label values as kept in [`Handles`].
#[derive(PartialEq, Eq)]
struct LabelValues<const N: usize>([Box<str>; N]);

/// Label values as a sample names them; hashes as [`LabelValues`] does.
#[derive(Hash)]
struct LabelRefs<'a, const N: usize>([&'a str; N]);

impl<const N: usize> Hash for LabelValues<N> {
    fn hash<S: Hasher>(&self, state: &mut S) {
        let refs: [&str; N] = std::array::from_fn(|i| &*self.0[i]);
        refs.hash(state);
    }
}

impl<const N: usize> Equivalent<LabelValues<N>> for LabelRefs<'_, N> {
    fn equivalent(&self, key: &LabelValues<N>) -> bool {
        self.0.iter().zip(&key.0).all(|(a, b)| *a == &**b)
    }
}

impl<const N: usize, H> Handles<N, H> {
    pub(super) const fn new() -> Self {
        Handles {
            map: RwLock::new(None),
        }
    }

    /// Runs `sample` on the handles of `labels`, registering them with `register` (given the
    /// label values as owned strings) the first time.
    pub(super) fn with(
        &self,
        labels: [&str; N],
        register: impl FnOnce([String; N]) -> H,
        sample: impl FnOnce(&H),
    ) {
        let key = LabelRefs(labels);
        {
            let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(handles) = map.as_ref().and_then(|m| m.get(&key)) {
                sample(handles);
                return;
            }
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        let map = map.get_or_insert_with(HashMap::new);
        let handles = map
            .entry(LabelValues(labels.map(Box::from)))
            .or_insert_with(|| register(labels.map(str::to_owned)));
        sample(handles);
    }
}
