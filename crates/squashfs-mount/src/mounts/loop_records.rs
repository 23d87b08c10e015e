//! The tool's loop devices, one file each in the root-only
//! `/run/squashfs-mount/devices/` (named by the device's number), which
//! serves two ends, so that no launch ever opens a device another launch
//! may hold a kernel lock on, nor waits for one:
//!
//! - **the claim**: a launch takes an exclusive `flock` on the file,
//!   without waiting, before it opens `/dev/loopN`, and holds it until the
//!   device is configured, verified and recorded. A launch that finds it
//!   taken never opens that device: it asks the kernel for a device number
//!   nobody was given yet (`LOOP_CTL_ADD`). Nor does it open a device that
//!   is bound already. (Before, launches that went on without the loop
//!   lock were handed, by `LOOP_CTL_GET_FREE`, the device a starved holder
//!   was configuring, and slept in the kernel on its mutex.)
//! - **the record**: an extended attribute of the file says whose launch
//!   attached the device, to which file, under which disk sequence number
//!   (the kernel raises it at each configure and each clear, and never
//!   gives one twice). A record counts only while `/sys/block/loopN/diskseq`
//!   still shows its number: counting reads sysfs and these files, and
//!   never opens a device (an open waits for the device's kernel mutexes,
//!   which another user's process may hold while it releases the device).
//!
//! A device counts for the user whose launch attached it, except while the
//! cache holds its instance (the cache's own records say so: it counts for
//! the cache then), and except once the cache let go of it while a user
//! other than its maker had cloned it (`left`: it may be theirs, so it
//! counts for the cache still, within the cache's limits, and for no
//! user). Devices attached by versions before round 35 have no record and
//! are not counted.

use std::os::fd::{AsFd, OwnedFd};

use crate::mounts::state_dir;
use crate::privilege::AsRoot;
use crate::system::{self, Error, LockKind, Uid};

const DEVICES_DIR: &str = "devices";
const RECORD_ATTRIBUTE: &str = "trusted.squashfs-mount.loop";

/// A loop device whose instance the cache holds, as the cache's record
/// names it: its number and the backing file (device, inode). A device
/// reused since for another file is not it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedDevice {
    pub number: u32,
    pub backing: (u64, u64),
}

/// What the tool recorded about one binding of a loop device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The user whose launch attached it.
    pub maker: Uid,
    /// Its disk sequence number just after it was configured.
    pub seq: u64,
    /// The backing file (device, inode).
    pub backing: (u64, u64),
    /// The cache evicted its instance while another user than its maker
    /// had cloned it: it counts for the cache (this much kernel memory).
    pub left: Option<u64>,
}

impl Binding {
    fn encode(&self) -> String {
        let (dev, ino) = self.backing;
        let mut s = format!("1 {} {} {dev} {ino}", self.maker, self.seq);
        if let Some(cost) = self.left {
            s += &format!(" left {cost}");
        }
        s
    }

    fn decode(bytes: &[u8]) -> Option<Binding> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut f = text.split(' ');
        if f.next()? != "1" {
            return None;
        }
        let mut num = || f.next()?.parse::<u64>().ok();
        let maker = Uid::checked(u32::try_from(num()?).ok()?)?;
        let (seq, dev, ino) = (num()?, num()?, num()?);
        let left = match f.next() {
            None => None,
            Some("left") => Some(f.next()?.parse().ok()?),
            Some(_) => return None,
        };
        Some(Binding {
            maker,
            seq,
            backing: (dev, ino),
            left,
        })
    }
}

/// The tool's loop devices attached now, as counted from the records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttachedCount {
    /// All of them (cached, private, left).
    pub all: usize,
    /// Those counted for the user asked about: attached by their launches,
    /// neither held by the cache nor left to it.
    pub users: usize,
    /// Those left to the cache, and the kernel memory they hold.
    pub left: usize,
    pub left_bytes: u64,
}

/// Whom one current record counts for.
fn counted_for(record: &Binding, number: u32, cached: &[CachedDevice]) -> Whom {
    let held = cached.contains(&CachedDevice {
        number,
        backing: record.backing,
    });
    match (held, record.left) {
        (true, _) => Whom::Cache,
        (false, Some(bytes)) => Whom::Left(bytes),
        (false, None) => Whom::User(record.maker),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Whom {
    Cache,
    Left(u64),
    User(Uid),
}

/// The records' directory, opened for one launch. None where the state
/// directory cannot be used (a read-only /run): the limits are then not
/// enforced, and nothing is claimed.
pub struct Devices {
    dir: OwnedFd,
}

/// The claim of one device number: held until dropped.
pub struct DeviceClaim {
    file: OwnedFd,
}

impl Drop for DeviceClaim {
    fn drop(&mut self) {
        let _ = system::unlock(self.file.as_fd());
    }
}

impl DeviceClaim {
    /// Records the binding this claim's launch made.
    pub(crate) fn record(&self, record: &Binding) -> Result<(), Error> {
        system::set_fd_attribute(
            self.file.as_fd(),
            RECORD_ATTRIBUTE,
            record.encode().as_bytes(),
        )
    }
}

impl Devices {
    /// Opens (or makes) the records' directory.
    pub(crate) fn open(_root: &AsRoot) -> Result<Option<Devices>, state_dir::StateDirError> {
        Ok(state_dir::subdir(DEVICES_DIR)?.map(|dir| Devices { dir }))
    }

    /// Claims device `number`, without waiting: None when another launch
    /// holds its claim. A file removed (`tidy`) between its open and its
    /// lock is opened again: a claim is always on the file the name
    /// names.
    pub(crate) fn claim(&self, _root: &AsRoot, number: u32) -> Result<Option<DeviceClaim>, Error> {
        loop {
            let file = system::open_lock_file(self.dir.as_fd(), &number.to_string(), 0o600)?;
            if !system::try_lock(file.as_fd(), LockKind::Exclusive)? {
                return Ok(None);
            }
            if system::fstat(file.as_fd())?.nlink > 0 {
                return Ok(Some(DeviceClaim { file }));
            }
        }
    }

    /// Removes the file of device `number`, which is not bound, unless a
    /// launch holds its claim: numbers the tool no longer uses cost later
    /// counts nothing.
    fn tidy(&self, root: &AsRoot, number: u32) {
        if let Ok(Some(_claim)) = self.claim(root, number) {
            let _ = system::remove_file(self.dir.as_fd(), &number.to_string());
        }
    }

    /// The current record of device `number`: one whose disk sequence
    /// number the device still shows.
    fn current(&self, number: u32) -> Option<Binding> {
        let file = system::open_read_nofollow(self.dir.as_fd(), &number.to_string()).ok()?;
        let bytes = system::fd_attribute(file.as_fd(), RECORD_ATTRIBUTE).ok()??;
        let record = Binding::decode(&bytes)?;
        (system::loop_disk_sequence(number) == Some(record.seq)).then_some(record)
    }

    /// Every device number with a current record, and its record. Only
    /// bound devices' records are read (one `stat` in sysfs tells: most
    /// numbers the tool ever used are free again).
    fn records(&self, root: &AsRoot) -> Vec<(u32, Binding)> {
        let Ok((names, _)) = system::list_dir(self.dir.as_fd(), ".", 1 << 20) else {
            return Vec::new();
        };
        let (bound, free): (Vec<u32>, Vec<u32>) = names
            .iter()
            .filter_map(|n| n.to_str()?.parse::<u32>().ok())
            .partition(|&n| system::loop_bound(n));
        for n in free {
            self.tidy(root, n);
        }
        bound
            .into_iter()
            .filter_map(|n| Some((n, self.current(n)?)))
            .collect()
    }

    /// Counts the tool's loop devices, and those counted for `uid`: read
    /// after every record, `cached` (the devices whose instance the cache
    /// holds, by its own records) can only have moved a device of `uid`'s
    /// to the cache meanwhile, never hide one.
    pub(crate) fn count(
        &self,
        root: &AsRoot,
        uid: Uid,
        cached: impl FnOnce() -> Vec<CachedDevice>,
    ) -> AttachedCount {
        let records = self.records(root);
        let cached = if records.iter().any(|(_, r)| r.maker == uid) {
            cached()
        } else {
            Vec::new()
        };
        records
            .iter()
            .fold(AttachedCount::default(), |mut c, (n, r)| {
                c.all += 1;
                match counted_for(r, *n, &cached) {
                    Whom::User(u) if u == uid => c.users += 1,
                    Whom::Left(bytes) => {
                        c.left += 1;
                        c.left_bytes += bytes;
                    }
                    _ => {}
                }
                c
            })
    }

    /// The devices left to the cache now, and their kernel memory.
    pub(crate) fn left(&self, root: &AsRoot) -> (usize, u64) {
        self.records(root)
            .iter()
            .filter_map(|(_, r)| r.left)
            .fold((0, 0), |(n, b), cost| (n + 1, b + cost))
    }

    /// The cache is letting go of the instance on device `number` (backed
    /// by `backing`) while another user than its maker had cloned it:
    /// from now on it counts for the cache (`cost` bytes), not its maker.
    /// Done under the device's claim, and only to the binding the cache
    /// had (a device being configured anew is skipped: its instance is
    /// gone already).
    pub(crate) fn leave_to_the_cache(
        &self,
        root: &AsRoot,
        number: u32,
        backing: (u64, u64),
        cost: u64,
    ) {
        let Ok(Some(claim)) = self.claim(root, number) else {
            return;
        };
        if let Some(record) = self.current(number).filter(|r| r.backing == backing) {
            let _ = claim.record(&Binding {
                left: Some(cost),
                ..record
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let r = Binding {
            maker: Uid::from_raw(1234),
            seq: 77,
            backing: (2049, 12),
            left: None,
        };
        assert_eq!(Binding::decode(r.encode().as_bytes()), Some(r));
        let left = Binding {
            left: Some(655360),
            ..r
        };
        assert_eq!(Binding::decode(left.encode().as_bytes()), Some(left));
        assert_eq!(Binding::decode(b"2 1234 77 2049 12"), None);
        assert_eq!(Binding::decode(b"1 4294967295 77 2049 12"), None);
        assert_eq!(Binding::decode(b"1 1234 77 2049"), None);
        assert_eq!(Binding::decode(b"1 1234 77 2049 12 other 5"), None);
    }

    #[test]
    fn a_device_counts_for_the_cache_while_it_holds_it_then_for_its_maker_unless_left() {
        let maker = Uid::from_raw(1234);
        let r = Binding {
            maker,
            seq: 1,
            backing: (5, 6),
            left: None,
        };
        let cached = [CachedDevice {
            number: 3,
            backing: (5, 6),
        }];
        assert_eq!(counted_for(&r, 3, &cached), Whom::Cache);
        // Another binding of the same number is not the cache's.
        assert_eq!(counted_for(&r, 4, &cached), Whom::User(maker));
        assert_eq!(counted_for(&r, 3, &[]), Whom::User(maker));
        let left = Binding { left: Some(9), ..r };
        assert_eq!(counted_for(&left, 3, &[]), Whom::Left(9));
        assert_eq!(counted_for(&left, 3, &cached), Whom::Cache);
    }
}
