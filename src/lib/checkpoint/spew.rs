//! The kubelet's checkpoint checksum: FNV-32a over the text go-spew prints
//! for the `checkpointData` value with `%#v` (docs/kubelet-versions.md §7).
//!
//! This is a printer for exactly the Go types of the device manager's
//! checkpoint, following go-spew's formatter (`format.go`, the `%#v` path):
//! a value's type is printed as `(TYPE)` before it, except for slice
//! elements, map keys and map values; strings are written raw (no quotes, no
//! escaping); integers in decimal; a nil slice prints `<nil>`, an empty one
//! `[]`; maps print `map[k:v k:v]` with keys sorted (int64 numerically,
//! strings by bytes) and a nil map prints `map[]`; structs print
//! `{Field:(type)value Field2:...}`. With `%#v` the config flags
//! `DisablePointerAddresses` and `DisableCapacities` change nothing, so the
//! text (and the checksum) is the same for every kubelet version.

use std::collections::BTreeMap;

use super::{CheckpointData, DeviceIds, PodDevicesEntry};

/// Where the printed text goes: a hash or a buffer.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// FNV-1a, 32 bit (Go's `hash/fnv.New32a`), fed incrementally.
#[derive(Debug, Clone, Copy)]
pub struct Fnv32a(u32);

impl Default for Fnv32a {
    fn default() -> Self {
        Fnv32a(0x811c_9dc5)
    }
}

impl Fnv32a {
    /// The hash of everything fed so far.
    pub fn sum32(self) -> u32 {
        self.0
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u32::from(*b)).wrapping_mul(0x0100_0193);
        }
    }
}

impl Sink for Fnv32a {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// The text go-spew prints for `data` with `%#v` (one line).
pub fn spew_text(data: &CheckpointData) -> String {
    let mut out = Vec::new();
    print_data(data, &mut out);
    // Every piece written is valid UTF-8 (Rust strings and ASCII).
    String::from_utf8_lossy(&out).into_owned()
}

/// The checksum the kubelet computes and stores for `data`.
pub fn checksum(data: &CheckpointData) -> u64 {
    let mut h = Fnv32a::default();
    print_data(data, &mut h);
    u64::from(h.sum32())
}

fn print_data(data: &CheckpointData, out: &mut impl Sink) {
    out.put(b"(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)");
    match &data.pod_device_entries {
        None => out.put(b"<nil>"),
        Some(entries) => {
            out.put(b"[");
            for (i, e) in entries.iter().enumerate() {
                if i > 0 {
                    out.put(b" ");
                }
                print_entry(e, out);
            }
            out.put(b"]");
        }
    }
    out.put(b" RegisteredDevices:(map[string][]string)");
    print_string_map(data.registered_devices.as_ref(), out);
    out.put(b"}");
}

/// A slice element: a struct without its type, fields with theirs.
fn print_entry(e: &PodDevicesEntry, out: &mut impl Sink) {
    out.put(b"{PodUID:(string)");
    out.put(e.pod_uid.as_bytes());
    out.put(b" ContainerName:(string)");
    out.put(e.container_name.as_bytes());
    out.put(b" ResourceName:(string)");
    out.put(e.resource_name.as_bytes());
    match &e.device_ids {
        DeviceIds::PerNuma(m) => {
            out.put(b" DeviceIDs:(checkpoint.DevicesPerNUMA)");
            print_numa_map(m.as_ref(), out);
        }
        // The pre-1.20 layout: the same type names, DeviceIDs a []string.
        DeviceIds::Legacy(ids) => {
            out.put(b" DeviceIDs:([]string)");
            print_strings(ids.as_deref(), out);
        }
    }
    out.put(b" AllocResp:([]uint8)");
    match &e.alloc_resp {
        None => out.put(b"<nil>"),
        Some(bytes) => {
            // One buffer for the whole list, no allocation per byte: the
            // sim computes this at every admission (its checkpoint write).
            let mut text = Vec::with_capacity(bytes.len() * 4 + 2);
            text.push(b'[');
            for (i, b) in bytes.iter().enumerate() {
                if i > 0 {
                    text.push(b' ');
                }
                push_decimal(&mut text, *b);
            }
            text.push(b']');
            out.put(&text);
        }
    }
    out.put(b"}");
}

/// `b` in decimal, as `%v` prints a uint8.
fn push_decimal(out: &mut Vec<u8>, b: u8) {
    if b >= 100 {
        out.push(b'0' + b / 100);
    }
    if b >= 10 {
        out.push(b'0' + (b / 10) % 10);
    }
    out.push(b'0' + b % 10);
}

/// A `[]string` without its type: `<nil>`, `[]` or `[a b]`.
fn print_strings(ids: Option<&[String]>, out: &mut impl Sink) {
    match ids {
        None => out.put(b"<nil>"),
        Some(ids) => {
            out.put(b"[");
            for (i, id) in ids.iter().enumerate() {
                if i > 0 {
                    out.put(b" ");
                }
                out.put(id.as_bytes());
            }
            out.put(b"]");
        }
    }
}

/// `map[string][]string`, keys sorted by bytes (a `BTreeMap<String, _>` is).
fn print_string_map(m: Option<&BTreeMap<String, Option<Vec<String>>>>, out: &mut impl Sink) {
    out.put(b"map[");
    for (i, (k, v)) in m.into_iter().flatten().enumerate() {
        if i > 0 {
            out.put(b" ");
        }
        out.put(k.as_bytes());
        out.put(b":");
        print_strings(v.as_deref(), out);
    }
    out.put(b"]");
}

/// `DevicesPerNUMA` (`map[int64][]string`), keys sorted numerically.
fn print_numa_map(m: Option<&BTreeMap<i64, Option<Vec<String>>>>, out: &mut impl Sink) {
    out.put(b"map[");
    for (i, (k, v)) in m.into_iter().flatten().enumerate() {
        if i > 0 {
            out.put(b" ");
        }
        out.put(k.to_string().as_bytes());
        out.put(b":");
        print_strings(v.as_deref(), out);
    }
    out.put(b"]");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_print_in_decimal() {
        let mut out = Vec::new();
        for b in [0u8, 7, 10, 99, 100, 200, 255] {
            push_decimal(&mut out, b);
            out.push(b' ');
        }
        assert_eq!(out, b"0 7 10 99 100 200 255 ");
    }

    #[test]
    fn fnv32a_matches_go_hash_fnv() {
        // Go: fnv.New32a() with nothing written is the offset basis; "a" is 0xe40c292c.
        assert_eq!(Fnv32a::default().sum32(), 0x811c_9dc5);
        let mut h = Fnv32a::default();
        h.update(b"a");
        assert_eq!(h.sum32(), 0xe40c_292c);
    }
}
