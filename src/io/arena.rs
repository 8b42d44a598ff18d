//! The start-up allocator: the first allocations (command-line parsing,
//! configuration, logger set-up) come from a small static arena and are
//! never freed; everything after it spills over to the system allocator.
//!
//! Why: musl's allocator hands memory back to the kernel eagerly, so the
//! burst of short-lived allocations clap makes at start-up cost ~40
//! mmap/munmap calls and their TLB flushes, which made `drainit -- app`
//! start measurably slower than tini. A bump arena turns them into pointer
//! arithmetic. Only the binary installs it (see `main.rs`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

const SIZE: usize = 64 * 1024;

/// The block and its bump counter, together: every `StartupArena` value
/// is a handle to this one block, so two handles can never hand out the
/// same bytes.
#[repr(C, align(64))]
struct Space {
    bytes: UnsafeCell<[u8; SIZE]>,
    used: AtomicUsize,
}

// SAFETY: disjoint regions are handed out by the one atomic bump counter,
// so no two allocations ever alias.
unsafe impl Sync for Space {}

static SPACE: Space = Space {
    bytes: UnsafeCell::new([0; SIZE]),
    used: AtomicUsize::new(0),
};

/// Bump allocation from the static arena, then the system allocator. A
/// handle: every value shares the one block and its counter.
pub struct StartupArena {
    _handle: (),
}

impl StartupArena {
    pub const fn new() -> StartupArena {
        StartupArena { _handle: () }
    }

    /// The block's first byte. Arena pointers are derived from this one
    /// (never made from integers), so Miri's strict provenance can check them.
    fn base() -> *mut u8 {
        SPACE.bytes.get().cast::<u8>()
    }

    fn owns(ptr: *mut u8) -> bool {
        let base = Self::base() as usize;
        (base..base + SIZE).contains(&(ptr as usize))
    }

    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        let base = Self::base() as usize;
        let mut used = SPACE.used.load(Ordering::Relaxed);
        loop {
            let start = (base + used).next_multiple_of(layout.align()) - base;
            let end = start.checked_add(layout.size())?;
            if end > SIZE {
                return None;
            }
            match SPACE
                .used
                .compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                // `start + size <= SIZE`: in bounds of the block.
                Ok(_) => return Some(Self::base().wrapping_add(start)),
                Err(now) => used = now,
            }
        }
    }
}

impl Default for StartupArena {
    fn default() -> StartupArena {
        StartupArena::new()
    }
}

// SAFETY: arena pointers are unique and in bounds; everything else is
// System's, returned to System.
unsafe impl GlobalAlloc for StartupArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(ptr) => ptr,
            None => System.alloc(layout),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            // The arena is zeroed static memory, and never reused.
            Some(ptr) => ptr,
            None => System.alloc_zeroed(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Arena memory is never reused: start-up allocations are few.
        if !Self::owns(ptr) {
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !Self::owns(ptr) {
            return System.realloc(ptr, layout, new_size);
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bumps_then_spills_over() {
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            let a = arena.alloc(Layout::from_size_align(10, 8).unwrap());
            let b = arena.alloc(Layout::from_size_align(10, 64).unwrap());
            assert!(StartupArena::owns(a) && StartupArena::owns(b));
            assert_eq!(b as usize % 64, 0);
            assert!(b as usize >= a as usize + 10);
            let c = arena.realloc(a, Layout::from_size_align(10, 8).unwrap(), 100);
            assert!(StartupArena::owns(c));
            let big = Layout::from_size_align(SIZE, 8).unwrap();
            let d = arena.alloc(big);
            assert!(
                !d.is_null() && !StartupArena::owns(d),
                "too big for what is left: from System"
            );
            arena.dealloc(d, big);
            arena.dealloc(b, Layout::from_size_align(10, 64).unwrap());
        }
    }

    #[test]
    fn two_handles_never_hand_out_the_same_bytes() {
        let (one, two) = (StartupArena::new(), StartupArena::default());
        let layout = Layout::from_size_align(32, 8).unwrap();
        // SAFETY: test allocations with a valid layout, written in full.
        unsafe {
            let a = one.alloc(layout);
            let b = two.alloc(layout);
            assert!(StartupArena::owns(a) && StartupArena::owns(b));
            let (a0, b0) = (a as usize, b as usize);
            assert!(
                a0 + 32 <= b0 || b0 + 32 <= a0,
                "{a0:#x} and {b0:#x} overlap"
            );
            std::ptr::write_bytes(a, 0xaa, 32);
            std::ptr::write_bytes(b, 0xbb, 32);
            assert_eq!(*a.add(31), 0xaa, "b's writes reached a");
        }
    }
}
