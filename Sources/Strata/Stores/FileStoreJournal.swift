import Foundation

/// The SHA-256 of a key: the name of its entry file in a ``FileStore``'s directory, kept as four
/// big-endian words so an index of many entries stays small, hashes fast and sorts like the file names.
struct EntryName: Hashable, Comparable, Sendable, CustomStringConvertible {
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
        let words = Array(digest).withUnsafeBytes { Self.words(in: $0) }
        (w0, w1, w2, w3) = (words.0, words.1, words.2, words.3)
    }

    /// Reads a name from the first 32 bytes of `raw`.
    init(raw: UnsafeRawBufferPointer) {
        (w0, w1, w2, w3) = Self.words(in: raw)
    }

    /// The name of an entry file: exactly 64 lowercase hexadecimal digits; `nil` for any other file.
    init?(fileName: String) {
        var words: [UInt64] = [0, 0, 0, 0]
        var digits = 0
        for character in fileName.utf8 {
            guard digits < Self.byteCount * 2, let value = Self.hexValue(character) else { return nil }
            words[digits / 16] = words[digits / 16] << 4 | UInt64(value)
            digits += 1
        }
        guard digits == Self.byteCount * 2 else { return nil }
        (w0, w1, w2, w3) = (words[0], words[1], words[2], words[3])
    }

    /// Appends the 32 digest bytes to `bytes`.
    func append(to bytes: inout [UInt8]) {
        for word in [w0, w1, w2, w3] {
            withUnsafeBytes(of: word.bigEndian) { bytes.append(contentsOf: $0) }
        }
    }

    /// The 32 digest bytes.
    var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        append(to: &bytes)
        return bytes
    }

    /// The entry's file name: 64 lowercase hexadecimal digits, as ``FileStore/fileURL(for:)`` uses.
    var fileName: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: Self.byteCount * 2)
        var position = 0
        for word in [w0, w1, w2, w3] {
            for shift in stride(from: 60, through: 0, by: -4) {
                out[position] = digits[Int(truncatingIfNeeded: (word >> UInt64(shift)) & 0xF)]
                position += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    var description: String { fileName }

    static func < (lhs: EntryName, rhs: EntryName) -> Bool {
        (lhs.w0, lhs.w1, lhs.w2, lhs.w3) < (rhs.w0, rhs.w1, rhs.w2, rhs.w3)
    }

    private static func words(in raw: UnsafeRawBufferPointer) -> (UInt64, UInt64, UInt64, UInt64) {
        (
            UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
            UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
            UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
            UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        )
    }

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
        append(record, to: &bytes)
        return bytes
    }

    /// Appends the ``recordSize`` bytes of `record` to `bytes`.
    static func append(_ record: Record, to bytes: inout [UInt8]) {
        let start = bytes.count
        switch record {
        case .access(let name, let size):
            bytes.append(1)
            name.append(to: &bytes)
            appendBigEndian(UInt64(max(0, size)), to: &bytes)
        case .remove(let name):
            bytes.append(2)
            name.append(to: &bytes)
            appendBigEndian(UInt64(0), to: &bytes)
        }
        let sum = bytes.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[start..<start + 41])) }
        appendBigEndian(sum, to: &bytes)
    }

    /// The record in `bytes` (exactly ``recordSize`` of them); `nil` when it is damaged.
    static func decode(_ bytes: ArraySlice<UInt8>) -> Record? {
        guard bytes.count == recordSize else { return nil }
        return bytes.withUnsafeBytes { decode(raw: $0) }
    }

    /// The largest entry size a record may name (1 TiB): no entry this store writes comes near it,
    /// and the index adds sizes up, so a record naming more is damage, not a size. (A record naming
    /// `Int.max`, with a valid checksum, would overflow the index's total and trap.)
    static let maxEntrySize: UInt64 = 1 << 40

    /// The record in the first ``recordSize`` bytes of `raw`; `nil` when it is damaged.
    static func decode(raw: UnsafeRawBufferPointer) -> Record? {
        guard raw.count >= recordSize else { return nil }
        let stored = UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: 41, as: UInt32.self))
        guard stored == checksum(UnsafeRawBufferPointer(rebasing: raw[0..<41])) else { return nil }
        let name = EntryName(raw: UnsafeRawBufferPointer(rebasing: raw[1..<33]))
        let size = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 33, as: UInt64.self))
        switch raw[0] {
        case 1 where size <= maxEntrySize: return .access(name, size: Int(size))
        case 2 where size == 0: return .remove(name)
        default: return nil
        }
    }

    /// FNV-1a, 32 bits: enough to tell a damaged record from a written one (not a security measure).
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for index in 0..<bytes.count {
            hash ^= UInt32(bytes[index])
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
