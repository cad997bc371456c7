import Foundation

/// Reads one value in ``BinaryCodec``'s format from a buffer that outlives it. Every read is bounds-
/// checked and every mismatch throws `DecodingError`: arbitrary bytes never crash it.
///
/// Speed comes from the format and from doing little per value: keys are small indices into the key
/// table (read once, then compared as `String`s that are almost always small, inline strings, so no
/// allocation and a two-word comparison), strings are made straight from the buffer, integers are
/// varints, and `String`, `Int`, `Double`, `Bool`, `Date`, `URL` and `UUID` values asked for
/// generically skip the `Decoder` round trip.
final class BinaryValueReader: Decoder, SingleValueDecodingContainer {
    let base: UnsafeRawBufferPointer
    var position = 0
    let end: Int
    /// The key table, in index order.
    var keys: [String] = []
    /// URLs already made, by the position of their bytes (a repeated URL is a reference to the first).
    private var urls: [Int: URL] = [:]
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ base: UnsafeRawBufferPointer) {
        self.base = base
        self.end = base.count
    }

    /// A reader over the same bytes and key table, starting at `position` (for `superDecoder`).
    private init(sharing other: BinaryValueReader, at position: Int, end: Int) {
        self.base = other.base
        self.end = end
        self.position = position
        self.keys = other.keys
    }

    // MARK: Primitive reads

    func fail(_ reason: String) -> DecodingError { BinaryFormat.corrupt(reason) }

    @inline(__always)
    func readByte() throws -> UInt8 {
        guard position < end else { throw fail("unexpected end of data at byte \(position)") }
        defer { position += 1 }
        return base[position]
    }

    @inline(__always)
    func expect(_ tag: BinaryFormat.Tag, for type: Any.Type) throws {
        guard position < end, base[position] == tag.rawValue else { throw mismatch(tag, for: type) }
        position += 1
    }

    private func mismatch(_ tag: BinaryFormat.Tag, for type: Any.Type) -> DecodingError {
        let found = position < end ? "tag \(base[position])" : "the end of the data"
        return DecodingError.typeMismatch(type, DecodingError.Context(
            codingPath: [], debugDescription: "expected \(tag) for \(type), found \(found) at byte \(position)"))
    }

    @inline(__always)
    func readVarint() throws -> UInt64 {
        let first = try readByte()
        if first < 0x80 { return UInt64(first) }
        return try readVarintTail(first)
    }

    private func readVarintTail(_ first: UInt8) throws -> UInt64 {
        var result = UInt64(first & 0x7F)
        var shift: UInt64 = 7
        while true {
            let byte = try readByte()
            guard shift < 63 || (shift == 63 && byte <= 1) else { throw fail("an integer longer than 64 bits at byte \(position)") }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
    }

    @inline(__always)
    func readFixed<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let size = MemoryLayout<T>.size
        guard end - position >= size else { throw fail("unexpected end of data at byte \(position)") }
        defer { position += size }
        return T(littleEndian: base.loadUnaligned(fromByteOffset: position, as: T.self))
    }

    /// A length-prefixed run of bytes: its start and count, after checking it fits.
    @inline(__always)
    func readLengthPrefixed() throws -> (start: Int, count: Int) {
        let length = try readVarint()
        guard length <= UInt64(end - position) else { throw fail("a length of \(length) runs past the end at byte \(position)") }
        let start = position
        position += Int(length)
        return (start, Int(length))
    }

    @inline(__always)
    func readStringPayload() throws -> String {
        let (start, count) = try readLengthPrefixed()
        return String(decoding: UnsafeRawBufferPointer(rebasing: base[start..<(start + count)]), as: UTF8.self)
    }

    @inline(__always)
    func readSigned<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try expect(.signed, for: type)
        let zigzag = try readVarint()
        let value = Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1)))
        guard let exact = T(exactly: value) else { throw fail("\(value) does not fit in \(type)") }
        return exact
    }

    @inline(__always)
    func readUnsigned<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try expect(.unsigned, for: type)
        let value = try readVarint()
        guard let exact = T(exactly: value) else { throw fail("\(value) does not fit in \(type)") }
        return exact
    }

    /// Moves past the value that starts at `position` (used to skip values by key lookup).
    func skipValue() throws {
        let tag = try readByte()
        switch BinaryFormat.Tag(rawValue: tag) {
        case .null, .false, .true: break
        case .signed, .unsigned, .urlReference: _ = try readVarint()
        case .double, .date: _ = try readFixed(UInt64.self)
        case .float: _ = try readFixed(UInt32.self)
        case .string, .url, .data: _ = try readLengthPrefixed()
        case .uuid:
            guard end - position >= 16 else { throw fail("a UUID runs past the end") }
            position += 16
        case .keyed, .unkeyed:
            let length = Int(try readFixed(UInt32.self))
            _ = try readFixed(UInt32.self)
            guard length <= end - position else { throw fail("a container runs past the end at byte \(position)") }
            position += length
        case nil:
            throw fail("unknown tag \(tag) at byte \(position - 1)")
        }
    }

    // MARK: Key table

    /// Reads the key table at the start of the body.
    func readKeyTable() throws {
        let count = try readVarint()
        // Every key takes at least one byte, so a count beyond the bytes left is damage.
        guard count <= UInt64(end - position) else { throw fail("a key table of \(count) keys does not fit") }
        keys.reserveCapacity(Int(count))
        for _ in 0..<count { keys.append(try readStringPayload()) }
    }

    // MARK: Values

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        // The common leaves first, without a round trip through `init(from:)`.
        if T.self == String.self { return unsafeBitCast(try decode(String.self), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try decode(Int.self), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try decode(Double.self), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try decode(Bool.self), to: T.self) }
        if T.self == URL.self { return unsafeBitCast(try decodeURL(), to: T.self) }
        if T.self == Date.self {
            try expect(.date, for: type)
            return unsafeBitCast(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try readFixed(UInt64.self))), to: T.self)
        }
        if T.self == UUID.self {
            try expect(.uuid, for: type)
            guard end - position >= 16 else { throw fail("a UUID runs past the end") }
            var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: base[position..<(position + 16)])) }
            position += 16
            return unsafeBitCast(UUID(uuid: raw), to: T.self)
        }
        if T.self == Data.self {
            try expect(.data, for: type)
            let (start, count) = try readLengthPrefixed()
            return Data(UnsafeRawBufferPointer(rebasing: base[start..<(start + count)])) as! T  // T is Data
        }
        return try T(from: self)
    }

    /// A URL, or a reference to one written earlier: each distinct URL is parsed once per decode.
    private func decodeURL() throws -> URL {
        let tagPosition = position
        let tag = try readByte()
        if tag == BinaryFormat.Tag.url.rawValue {
            let start = position
            if let url = urls[start] {
                _ = try readLengthPrefixed()
                return url
            }
            return try makeURL(at: start)
        }
        guard tag == BinaryFormat.Tag.urlReference.rawValue else {
            position = tagPosition
            throw mismatch(.url, for: URL.self)
        }
        // A reference holds the position of the first copy's bytes, which come before the reference.
        let target = try readVarint()
        guard target >= 1, target < UInt64(tagPosition), base[Int(target) - 1] == BinaryFormat.Tag.url.rawValue else {
            throw fail("a URL reference to byte \(target) at byte \(tagPosition) does not point back to a URL")
        }
        if let url = urls[Int(target)] { return url }
        // The first copy was never decoded (its value was skipped): read it where it is.
        let resume = position
        position = Int(target)
        let url = try makeURL(at: Int(target))
        guard position <= tagPosition else { throw fail("a URL reference at byte \(tagPosition) overlaps its target") }
        position = resume
        return url
    }

    /// Parses the URL whose length-prefixed bytes start at `start` (the current position) and keeps it.
    private func makeURL(at start: Int) throws -> URL {
        let text = try readStringPayload()
        guard let url = URL(string: text) else { throw fail("'\(text)' is not a URL") }
        urls[start] = url
        return url
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try expect(.keyed, for: [String: Any].self)
        return KeyedDecodingContainer(try KeyedReader<Key>(reader: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try expect(.unkeyed, for: [Any].self)
        return try UnkeyedReader(reader: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    /// Reads a container header (after its tag): body length and count, checked against the data.
    @inline(__always)
    func readContainerHeader() throws -> (count: Int, bodyEnd: Int) {
        let length = Int(try readFixed(UInt32.self))
        let count = Int(try readFixed(UInt32.self))
        guard length <= end - position, count <= length else {
            throw fail("a container of \(length) bytes and \(count) entries does not fit at byte \(position)")
        }
        return (count, position + length)
    }

    /// A decoder for the value at `position` (which ends at `valueEnd`).
    func subdecoder(at position: Int, end valueEnd: Int) -> BinaryValueReader {
        BinaryValueReader(sharing: self, at: position, end: valueEnd)
    }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool {
        guard position < end, base[position] == BinaryFormat.Tag.null.rawValue else { return false }
        position += 1
        return true
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard position < end else { throw mismatch(.true, for: Bool.self) }
        switch base[position] {
        case BinaryFormat.Tag.true.rawValue: position += 1; return true
        case BinaryFormat.Tag.false.rawValue: position += 1; return false
        default: throw mismatch(.true, for: Bool.self)
        }
    }

    func decode(_ type: String.Type) throws -> String {
        try expect(.string, for: type)
        return try readStringPayload()
    }

    func decode(_ type: Double.Type) throws -> Double {
        try expect(.double, for: type)
        return Double(bitPattern: try readFixed(UInt64.self))
    }

    func decode(_ type: Float.Type) throws -> Float {
        try expect(.float, for: type)
        return Float(bitPattern: try readFixed(UInt32.self))
    }

    func decode(_ type: Int.Type) throws -> Int { try readSigned(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try readSigned(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try readSigned(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try readSigned(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try readSigned(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try readUnsigned(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try readUnsigned(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try readUnsigned(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try readUnsigned(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try readUnsigned(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }
}

/// A keyed container: reads entries in order while the caller asks for keys in the order they were
/// written, and falls back to an index of every key when it does not.
private final class KeyedReader<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let reader: BinaryValueReader
    let count: Int
    let bodyStart: Int
    let bodyEnd: Int
    /// The next entry in written order, and how many entries precede it.
    var cursor: Int
    var cursorIndex = 0
    /// Every entry's value position by key-table index, built on the first out-of-order request.
    var index: [Int: Int]?
    var codingPath: [any CodingKey] { [] }

    init(reader: BinaryValueReader) throws {
        self.reader = reader
        (count, bodyEnd) = try reader.readContainerHeader()
        bodyStart = reader.position
        cursor = bodyStart
        reader.position = bodyEnd  // the container's value ends here, whatever is read from it
    }

    var allKeys: [Key] {
        ((try? buildIndex()) ?? [:]).keys.compactMap { $0 < reader.keys.count ? Key(stringValue: reader.keys[$0]) : nil }
    }

    func contains(_ key: Key) -> Bool {
        (try? locate(key, advancing: false)) != nil
    }

    /// The position of `key`'s value; when it is the next entry in order and `advancing`, the cursor
    /// moves past that value.
    @inline(__always)
    private func locate(_ key: Key, advancing: Bool) throws -> Int? {
        if cursorIndex < count {
            reader.position = cursor
            let keyIndex = try reader.readVarint()
            if keyIndex < UInt64(reader.keys.count), reader.keys[Int(keyIndex)] == key.stringValue {
                let valueStart = reader.position
                if advancing {
                    try reader.skipValue()
                    guard reader.position <= bodyEnd else { throw reader.fail("an entry runs past its container") }
                    cursor = reader.position
                    cursorIndex += 1
                }
                return valueStart
            }
        }
        return try lookUp(key)
    }

    private func lookUp(_ key: Key) throws -> Int? {
        let name = key.stringValue
        guard let keyIndex = reader.keys.firstIndex(of: name) else { return nil }
        return try buildIndex()[keyIndex]
    }

    private func buildIndex() throws -> [Int: Int] {
        if let index { return index }
        var built: [Int: Int] = [:]
        built.reserveCapacity(count)
        reader.position = bodyStart
        for _ in 0..<count {
            let keyIndex = try reader.readVarint()
            guard keyIndex < UInt64(reader.keys.count) else { throw reader.fail("a key index out of range at byte \(reader.position)") }
            built[Int(keyIndex)] = reader.position
            try reader.skipValue()
            guard reader.position <= bodyEnd else { throw reader.fail("an entry runs past its container") }
        }
        index = built
        return built
    }

    /// Decodes the value for `key` with `body`, leaving the shared reader at this container's end.
    @inline(__always)
    private func value<T>(_ key: Key, _ body: () throws -> T) throws -> T {
        guard let position = try locate(key, advancing: true) else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: [], debugDescription: "no value for '\(key.stringValue)'"))
        }
        reader.position = position
        defer { reader.position = bodyEnd }
        return try body()
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        guard let position = try locate(key, advancing: false) else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: [], debugDescription: "no value for '\(key.stringValue)'"))
        }
        defer { reader.position = bodyEnd }
        guard position < bodyEnd, reader.base[position] == BinaryFormat.Tag.null.rawValue else { return false }
        _ = try locate(key, advancing: true)
        return true
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(key) { try reader.decode(type) } }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(key) { try reader.decode(type) } }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(key) { try reader.decode(type) } }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try value(key) { try reader.decode(type) } }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(key) { try reader.decode(type) } }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(key) { try reader.decode(type) } }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(key) { try reader.decode(type) } }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(key) { try reader.decode(type) } }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(key) { try reader.decode(type) } }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(key) { try reader.decode(type) } }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(key) { try reader.decode(type) } }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(key) { try reader.decode(type) } }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(key) { try reader.decode(type) } }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(key) { try reader.decode(type) } }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(key) { try reader.decodeValue(type) } }

    // The optional forms `decodeIfPresent` would otherwise make of `contains`, `decodeNil` and `decode`:
    // one key match instead of three.
    private func valueIfPresent<T>(_ key: Key, _ body: () throws -> T) throws -> T? {
        guard let position = try locate(key, advancing: true) else { return nil }
        defer { reader.position = bodyEnd }
        if position < bodyEnd, reader.base[position] == BinaryFormat.Tag.null.rawValue { return nil }
        reader.position = position
        return try body()
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try valueIfPresent(key) { try reader.decode(type) } }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try valueIfPresent(key) { try reader.decode(type) } }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try valueIfPresent(key) { try reader.decode(type) } }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try valueIfPresent(key) { try reader.decode(type) } }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try valueIfPresent(key) { try reader.decodeValue(type) } }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try value(key) { try reader.container(keyedBy: type) }
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try value(key) { try reader.unkeyedContainer() }
    }

    func superDecoder() throws -> any Decoder { try superDecoder(forKey: Key(stringValue: "super")!) }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        try value(key) {
            let start = reader.position
            try reader.skipValue()
            return reader.subdecoder(at: start, end: reader.position)
        }
    }
}

/// An unkeyed container: its values in order. Three words, so it lives inline in the existential that
/// `unkeyedContainer()` returns (no allocation per array).
private struct UnkeyedReader: UnkeyedDecodingContainer {
    let reader: BinaryValueReader
    private var next: UInt32
    private let bodyEnd: UInt32
    private var index: UInt32
    private let total: UInt32
    var codingPath: [any CodingKey] { [] }
    var count: Int? { Int(total) }
    var currentIndex: Int { Int(index) }
    var isAtEnd: Bool { index >= total }

    init(reader: BinaryValueReader) throws {
        self.reader = reader
        let header = try reader.readContainerHeader()
        // Positions fit in 32 bits: ``BinaryCodec/decode(_:)`` refuses bodies of 4 GiB or more.
        total = UInt32(header.count)
        bodyEnd = UInt32(header.bodyEnd)
        next = UInt32(reader.position)
        index = 0
        reader.position = header.bodyEnd
    }

    @inline(__always)
    private mutating func nextValue<T>(_ body: (BinaryValueReader) throws -> T) throws -> T {
        guard index < total else {
            throw DecodingError.valueNotFound(T.self, DecodingError.Context(codingPath: [], debugDescription: "the array has no more values"))
        }
        reader.position = Int(next)
        defer { reader.position = Int(bodyEnd) }
        let value = try body(reader)
        guard reader.position <= Int(bodyEnd) else { throw reader.fail("a value runs past its array") }
        next = UInt32(reader.position)
        index += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard index < total, next < bodyEnd, reader.base[Int(next)] == BinaryFormat.Tag.null.rawValue else { return false }
        next += 1
        index += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: String.Type) throws -> String { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try nextValue { reader in try reader.decode(type) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try nextValue { reader in try reader.decodeValue(type) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try nextValue { reader in try reader.container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try nextValue { reader in try reader.unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try nextValue { reader in
            let start = reader.position
            try reader.skipValue()
            return reader.subdecoder(at: start, end: reader.position)
        }
    }
}
