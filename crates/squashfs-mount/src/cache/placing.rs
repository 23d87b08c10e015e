//! Placing offers under the cache's exclusive lock: each fresh instance a
//! launch offers is either replaced by clones of one another launch
//! inserted meanwhile, inserted when the limits and its maker's share
//! leave room, or handed back to be used privately.

use super::entries::{clones_of, insert_entry, remove_entry, Host};
use super::evict;
use super::meta::Meta;
use super::store::{Offer, Placed};
use crate::config::CacheLimits;
use crate::system::Uid;

/// What the cache holds while offers are placed: its instances and bytes,
/// the makers of the entries that stay, and what this call took.
pub(super) struct Placing<'a> {
    pub(super) count: usize,
    pub(super) bytes: u64,
    pub(super) makers: Vec<Uid>,
    pub(super) taken: Vec<Meta>,
    pub(super) limits: CacheLimits,
    pub(super) secret: &'a [u8; 32],
    pub(super) host: &'a Host,
}

impl Placing<'_> {
    /// Places one offer (called inside the cache namespace, under the
    /// exclusive lock).
    pub(super) fn place(&mut self, offer: Offer) -> Placed {
        let key = offer.meta.key();
        let name = key.entry_name(self.secret);
        let (theirs, _) = clones_of(
            &name,
            &offer.meta.identity(),
            (key.fuse_user, offer.meta.uid),
            offer.copies,
            self.host,
        );
        if !theirs.is_empty() {
            return Placed::Cached(theirs);
        }
        let maker = offer.meta.uid;
        let mine = self.makers.iter().filter(|&&u| u == maker).count()
            + self.taken.iter().filter(|m| m.uid == maker).count();
        if !evict::has_room(self.count, self.bytes, offer.cost, self.limits)
            || !evict::within_share(mine, self.limits)
            || remove_entry(&name).is_err()
        {
            return Placed::Private(offer);
        }
        match insert_entry(&name, &offer.mount, &offer.meta, offer.copies) {
            Ok(clones) => {
                self.count += 1;
                self.bytes += offer.cost;
                self.taken.push(offer.meta);
                Placed::Cached(clones)
            }
            Err(_) => {
                let _ = remove_entry(&name);
                Placed::Private(offer)
            }
        }
    }
}
