import Foundation

/// The SHA-256 of a key: the name of its entry file in a ``FileStore``'s directory, kept as four
/// words so an index of many entries stays small and hashes fast.
struct EntryName: Hashable, Sendable, CustomStringConvertible {
    private var w0: UInt64
    private var w1: UInt64
    private var w2: UInt64
    private var w3: UInt64

    static let byteCount = 32

    /// The name of `key`'s entry file.
    init(key: String) {
        self.init(digest: SHA256.digest(Array(key.utf8)))!
    }

    /// The name made of 32 digest bytes; `nil` for any other length.
    init?(digest: some Collection<UInt8>) {
        guard digest.count == Self.byteCount else { return nil }
        var words: [UInt64] = [0, 0, 0, 0]
        for (offset, byte) in digest.enumerated() {
            words[offset / 8] = words[offset / 8] << 8 | UInt64(byte)
        }
        (w0, w1, w2, w3) = (words[0], words[1], words[2], words[3])
    }

    /// The name of an entry file: exactly 64 lowercase hexadecimal digits; `nil` for any other file.
    init?(fileName: String) {
        let utf8 = Array(fileName.utf8)
        guard utf8.count == Self.byteCount * 2 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        var index = 0
        while index < utf8.count {
            guard let high = Self.hexValue(utf8[index]), let low = Self.hexValue(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(digest: bytes)
    }

    /// The 32 digest bytes.
    var bytes: [UInt8] {
        [w0, w1, w2, w3].flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> UInt64(56 - $0 * 8)) } }
    }

    /// The entry's file name: 64 lowercase hexadecimal digits, as ``FileStore/fileURL(for:)`` uses.
    var fileName: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(Self.byteCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    var description: String { fileName }

    private static func hexValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

/// The byte layout of a ``FileStore``'s index journal (`.strata-index` in the store's directory).
///
/// ```
/// header, 16 bytes
///   "STRX"          4 bytes  magic
///   version         1 byte   (1)
///   reserved        3 bytes  zero
///   live entries    u64 big-endian: how many entries the journal held when it was written whole
/// records, 45 bytes each, appended in the order things happened (so the last record of an entry
/// says how recently it was used)
///   kind            1 byte   1 = access (written or read), 2 = removed
///   entry name      32 bytes the SHA-256 of the key (the entry's file name)
///   size            u64 big-endian: the entry file's size in bytes (0 for a removal)
///   checksum        u32 big-endian: FNV-1a of the 41 bytes before it
/// ```
/// Fixed-size records make a torn final append (a crash mid-write) detectable by length alone; the
/// checksum catches anything else. A journal that fails either check is rebuilt from the directory.
enum IndexJournal {
    static let fileName = ".strata-index"
    static let lockFileName = ".strata-index.lock"
    static let magic: [UInt8] = Array("STRX".utf8)
    static let version: UInt8 = 1
    static let headerSize = 16
    static let recordSize = 45

    enum Record: Equatable, Sendable {
        /// The entry was written or read, and its file has `size` bytes.
        case access(EntryName, size: Int)
        /// The entry's file was removed.
        case remove(EntryName)

        var name: EntryName {
            switch self {
            case .access(let name, _), .remove(let name): name
            }
        }
    }

    static func header(liveCount: Int) -> [UInt8] {
        var bytes = magic + [version, 0, 0, 0]
        appendBigEndian(UInt64(liveCount), to: &bytes)
        return bytes
    }

    /// The live-entry count of a valid header; `nil` when the bytes are not a header of this version.
    static func liveCount(inHeader bytes: some Collection<UInt8>) -> Int? {
        let bytes = Array(bytes)
        guard bytes.count == headerSize, bytes.prefix(4).elementsEqual(magic), bytes[4] == version,
              bytes[5...7].allSatisfy({ $0 == 0 }) else { return nil }
        let live = bigEndian(bytes[8..<16])
        return live <= UInt64(Int.max) ? Int(live) : nil
    }

    static func encode(_ record: Record) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(recordSize)
        switch record {
        case .access(let name, let size):
            bytes.append(1)
            bytes += name.bytes
            appendBigEndian(UInt64(max(0, size)), to: &bytes)
        case .remove(let name):
            bytes.append(2)
            bytes += name.bytes
            appendBigEndian(UInt64(0), to: &bytes)
        }
        appendBigEndian(checksum(bytes), to: &bytes)
        return bytes
    }

    /// The record in `bytes` (exactly ``recordSize`` of them); `nil` when it is damaged.
    static func decode(_ bytes: ArraySlice<UInt8>) -> Record? {
        guard bytes.count == recordSize else { return nil }
        let start = bytes.startIndex
        let body = bytes[start..<start + 41]
        guard UInt32(truncatingIfNeeded: bigEndian(bytes[start + 41..<start + 45])) == checksum(body),
              let name = EntryName(digest: bytes[start + 1..<start + 33]) else { return nil }
        let size = bigEndian(bytes[start + 33..<start + 41])
        switch bytes[start] {
        case 1 where size <= UInt64(Int.max): return .access(name, size: Int(size))
        case 2 where size == 0: return .remove(name)
        default: return nil
        }
    }

    /// FNV-1a, 32 bits: enough to tell a damaged record from a written one (not a security measure).
    static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for byte in bytes {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }

    private static func appendBigEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    private static func bigEndian(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
