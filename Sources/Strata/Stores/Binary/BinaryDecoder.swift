import Foundation

/// Reads one value in ``BinaryCodec``'s format from a buffer that outlives it. Every read is bounds-
/// checked and every mismatch throws `DecodingError`: arbitrary bytes never crash it.
final class BinaryValueReader: Decoder, SingleValueDecodingContainer {
    let base: UnsafeRawBufferPointer
    var position = 0
    let end: Int
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ base: UnsafeRawBufferPointer) {
        self.base = base
        self.end = base.count
    }

    // MARK: Primitive reads

    func fail(_ reason: String) -> DecodingError { BinaryFormat.corrupt(reason) }

    func readByte() throws -> UInt8 {
        guard position < end else { throw fail("unexpected end of data at byte \(position)") }
        defer { position += 1 }
        return base[position]
    }

    func peekTag() throws -> UInt8 {
        guard position < end else { throw fail("unexpected end of data at byte \(position)") }
        return base[position]
    }

    func expect(_ tag: BinaryFormat.Tag, for type: Any.Type) throws {
        let found = try readByte()
        guard found == tag.rawValue else {
            position -= 1
            throw DecodingError.typeMismatch(type, DecodingError.Context(
                codingPath: [], debugDescription: "expected \(tag) for \(type), found tag \(found) at byte \(position)"))
        }
    }

    func readVarint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try readByte()
            guard shift < 64, shift < 63 || byte <= 1 else { throw fail("an integer longer than 64 bits at byte \(position)") }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
    }

    func readFixed<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let size = MemoryLayout<T>.size
        guard end - position >= size else { throw fail("unexpected end of data at byte \(position)") }
        defer { position += size }
        return T(littleEndian: base.loadUnaligned(fromByteOffset: position, as: T.self))
    }

    /// A length-prefixed run of bytes: its start and count, after checking it fits.
    func readLengthPrefixed() throws -> (start: Int, count: Int) {
        let length = try readVarint()
        guard length <= UInt64(end - position) else { throw fail("a length of \(length) runs past the end at byte \(position)") }
        let start = position
        position += Int(length)
        return (start, Int(length))
    }

    func readStringPayload() throws -> String {
        let (start, count) = try readLengthPrefixed()
        return String(decoding: UnsafeRawBufferPointer(rebasing: base[start..<(start + count)]), as: UTF8.self)
    }

    func readSigned<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try expect(.signed, for: type)
        let zigzag = try readVarint()
        let value = Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1)))
        guard let exact = T(exactly: value) else { throw fail("\(value) does not fit in \(type)") }
        return exact
    }

    func readUnsigned<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try expect(.unsigned, for: type)
        let value = try readVarint()
        guard let exact = T(exactly: value) else { throw fail("\(value) does not fit in \(type)") }
        return exact
    }

    /// The byte after the value that starts at `position` (used to skip values by key lookup).
    func skipValue() throws {
        let tag = try readByte()
        switch BinaryFormat.Tag(rawValue: tag) {
        case .null, .false, .true: break
        case .signed, .unsigned: _ = try readVarint()
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

    // MARK: Values

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == Date.self {
            try expect(.date, for: type)
            let date = Date(timeIntervalSinceReferenceDate: Double(bitPattern: try readFixed(UInt64.self)))
            return date as! T  // T is Date
        }
        if T.self == URL.self {
            try expect(.url, for: type)
            let text = try readStringPayload()
            guard let url = URL(string: text) else { throw fail("'\(text)' is not a URL") }
            return url as! T  // T is URL
        }
        if T.self == UUID.self {
            try expect(.uuid, for: type)
            guard end - position >= 16 else { throw fail("a UUID runs past the end") }
            var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: base[position..<(position + 16)])) }
            position += 16
            return UUID(uuid: raw) as! T  // T is UUID
        }
        if T.self == Data.self {
            try expect(.data, for: type)
            let (start, count) = try readLengthPrefixed()
            return Data(UnsafeRawBufferPointer(rebasing: base[start..<(start + count)])) as! T  // T is Data
        }
        return try T(from: self)
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
    func readContainerHeader() throws -> (count: Int, bodyEnd: Int) {
        let length = Int(try readFixed(UInt32.self))
        let count = Int(try readFixed(UInt32.self))
        guard length <= end - position, count <= length else {
            throw fail("a container of \(length) bytes and \(count) entries does not fit at byte \(position)")
        }
        return (count, position + length)
    }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool {
        guard position < end, base[position] == BinaryFormat.Tag.null.rawValue else { return false }
        position += 1
        return true
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        switch try readByte() {
        case BinaryFormat.Tag.true.rawValue: return true
        case BinaryFormat.Tag.false.rawValue: return false
        default:
            position -= 1
            throw DecodingError.typeMismatch(Bool.self, DecodingError.Context(codingPath: [], debugDescription: "expected a Bool at byte \(position)"))
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
    /// Every key's value position, built on the first out-of-order request.
    var index: [String: Int]?
    var codingPath: [any CodingKey] { [] }

    init(reader: BinaryValueReader) throws {
        self.reader = reader
        (count, bodyEnd) = try reader.readContainerHeader()
        bodyStart = reader.position
        cursor = bodyStart
        reader.position = bodyEnd  // the container's value ends here, whatever is read from it
    }

    var allKeys: [Key] {
        ((try? buildIndex()) ?? [:]).keys.compactMap { Key(stringValue: $0) }
    }

    func contains(_ key: Key) -> Bool {
        (try? locate(key, advancing: false)) != nil
    }

    /// The position of `key`'s value; when it is the next entry in order and `advancing`, the cursor
    /// moves past that value.
    private func locate(_ key: Key, advancing: Bool) throws -> Int? {
        if cursorIndex < count {
            reader.position = cursor
            let (start, length) = try reader.readLengthPrefixed()
            let matches = key.stringValue.utf8.elementsEqual(UnsafeRawBufferPointer(rebasing: reader.base[start..<(start + length)]))
            if matches {
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
        return try buildIndex()[key.stringValue]
    }

    private func buildIndex() throws -> [String: Int] {
        if let index { return index }
        var built: [String: Int] = [:]
        built.reserveCapacity(count)
        reader.position = bodyStart
        for _ in 0..<count {
            let name = try reader.readStringPayload()
            built[name] = reader.position
            try reader.skipValue()
            guard reader.position <= bodyEnd else { throw reader.fail("an entry runs past its container") }
        }
        index = built
        return built
    }

    /// Decodes the value for `key` with `body`, leaving the shared reader at this container's end.
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
            let slice = UnsafeRawBufferPointer(rebasing: reader.base[start..<reader.position])
            return BinaryValueReader(slice)
        }
    }
}

/// An unkeyed container: its values in order.
private final class UnkeyedReader: UnkeyedDecodingContainer {
    let reader: BinaryValueReader
    let count: Int?
    let bodyEnd: Int
    var position: Int
    var currentIndex = 0
    var codingPath: [any CodingKey] { [] }
    var isAtEnd: Bool { currentIndex >= (count ?? 0) }

    init(reader: BinaryValueReader) throws {
        self.reader = reader
        let header = try reader.readContainerHeader()
        count = header.count
        bodyEnd = header.bodyEnd
        position = reader.position
        reader.position = bodyEnd
    }

    private func next<T>(_ body: () throws -> T) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(T.self, DecodingError.Context(codingPath: [], debugDescription: "the array has no more values"))
        }
        reader.position = position
        defer { reader.position = bodyEnd }
        let value = try body()
        guard reader.position <= bodyEnd else { throw reader.fail("a value runs past its array") }
        position = reader.position
        currentIndex += 1
        return value
    }

    func decodeNil() throws -> Bool {
        guard !isAtEnd, position < bodyEnd, reader.base[position] == BinaryFormat.Tag.null.rawValue else { return false }
        position += 1
        currentIndex += 1
        return true
    }

    func decode(_ type: Bool.Type) throws -> Bool { try next { try reader.decode(type) } }
    func decode(_ type: String.Type) throws -> String { try next { try reader.decode(type) } }
    func decode(_ type: Double.Type) throws -> Double { try next { try reader.decode(type) } }
    func decode(_ type: Float.Type) throws -> Float { try next { try reader.decode(type) } }
    func decode(_ type: Int.Type) throws -> Int { try next { try reader.decode(type) } }
    func decode(_ type: Int8.Type) throws -> Int8 { try next { try reader.decode(type) } }
    func decode(_ type: Int16.Type) throws -> Int16 { try next { try reader.decode(type) } }
    func decode(_ type: Int32.Type) throws -> Int32 { try next { try reader.decode(type) } }
    func decode(_ type: Int64.Type) throws -> Int64 { try next { try reader.decode(type) } }
    func decode(_ type: UInt.Type) throws -> UInt { try next { try reader.decode(type) } }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try reader.decode(type) } }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try reader.decode(type) } }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try reader.decode(type) } }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try reader.decode(type) } }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try next { try reader.decodeValue(type) } }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next { try reader.container(keyedBy: type) }
    }

    func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next { try reader.unkeyedContainer() }
    }

    func superDecoder() throws -> any Decoder {
        try next {
            let start = reader.position
            try reader.skipValue()
            return BinaryValueReader(UnsafeRawBufferPointer(rebasing: reader.base[start..<reader.position]))
        }
    }
}
