import Foundation

/// Writes one value in ``BinaryCodec``'s format. Containers are written in place: a container's tag
/// and two u32 placeholders (body length, count) go out when it is opened, and are filled in when it
/// closes — when its value finishes encoding, or when a write to an outer container proves it is done.
final class BinaryValueWriter: Encoder {
    var bytes: [UInt8] = []
    /// Where the value's body starts in `bytes` (after the header): positions in the format count from here.
    let bodyStart: Int
    /// The key table: each key's index, and the keys in index order.
    private var keyIndices: [String: Int] = [:]
    private var keyList: [String] = []
    /// Each URL written so far, by its text: the position of its bytes, for references.
    private var urlPositions: [String: Int] = [:]
    /// Set when a container grows past what its u32 length can say.
    private(set) var tooLarge = false
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    private struct OpenContainer {
        var lengthOffset: Int
        var count: UInt32
        var isKeyed: Bool
    }

    /// Containers not yet closed, outermost first.
    private var open: [OpenContainer] = []
    /// The container the value being encoded asked for, so asking twice returns the same one.
    private var valueContainer: Int?

    init(bodyStart: Int) {
        self.bodyStart = bodyStart
    }

    // MARK: Values

    func encodeValue<T: Encodable>(_ value: T) throws {
        if T.self == Date.self, let date = value as? Date {
            bytes.append(BinaryFormat.Tag.date.rawValue)
            appendFixed(date.timeIntervalSinceReferenceDate.bitPattern)
        } else if T.self == URL.self, let url = value as? URL {
            appendURL(url)
        } else if T.self == UUID.self, let uuid = value as? UUID {
            bytes.append(BinaryFormat.Tag.uuid.rawValue)
            withUnsafeBytes(of: uuid.uuid) { bytes.append(contentsOf: $0) }
        } else if T.self == Data.self, let data = value as? Data {
            bytes.append(BinaryFormat.Tag.data.rawValue)
            appendVarint(UInt64(data.count))
            bytes.append(contentsOf: data)
        } else {
            let depth = open.count
            let start = bytes.count
            let outer = valueContainer
            valueContainer = nil
            defer { valueContainer = outer }
            try value.encode(to: self)
            close(downTo: depth)
            if bytes.count == start {
                // A value that encoded nothing reads back as an empty keyed container.
                bytes.append(BinaryFormat.Tag.keyed.rawValue)
                appendFixed(UInt32(0))
                appendFixed(UInt32(0))
            }
        }
    }

    func appendString(_ string: String, tag: BinaryFormat.Tag = .string) {
        bytes.append(tag.rawValue)
        var string = string
        string.withUTF8 { utf8 in
            appendVarint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// A URL's text the first time it is written, a reference to that copy after (the decoder parses
    /// each distinct URL once).
    func appendURL(_ url: URL) {
        let text = url.absoluteString
        if let target = urlPositions[text] {
            bytes.append(BinaryFormat.Tag.urlReference.rawValue)
            appendVarint(UInt64(target))
            return
        }
        urlPositions[text] = bytes.count + 1 - bodyStart
        appendString(text, tag: .url)
    }

    /// Writes `key` as its index in the key table, adding it to the table the first time.
    func appendKey(_ key: String) {
        let keyIndex: Int
        if let known = keyIndices[key] {
            keyIndex = known
        } else {
            keyIndex = keyList.count
            keyIndices[key] = keyIndex
            keyList.append(key)
        }
        appendVarint(UInt64(keyIndex))
    }

    /// Closes every open container and appends the key table and the trailer that locates it.
    func finish() throws {
        close(downTo: 0)
        let tableOffset = bytes.count - bodyStart
        appendVarint(UInt64(keyList.count))
        for var key in keyList {
            key.withUTF8 { utf8 in
                appendVarint(UInt64(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }
        guard !tooLarge, let offset = UInt32(exactly: tableOffset), bytes.count - bodyStart <= Int(UInt32.max) else {
            throw EncodingError.invalidValue(bytes.count, EncodingError.Context(
                codingPath: [], debugDescription: "BinaryCodec encodes values of less than 4 GiB; this one is \(bytes.count) bytes"))
        }
        appendFixed(offset)
    }

    func appendSigned(_ value: Int64) {
        bytes.append(BinaryFormat.Tag.signed.rawValue)
        appendVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    func appendUnsigned(_ value: UInt64) {
        bytes.append(BinaryFormat.Tag.unsigned.rawValue)
        appendVarint(value)
    }

    func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    func appendFixed<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    // MARK: Containers

    /// Opens a container at the current position; returns its index in `open`.
    func openContainer(keyed: Bool) -> Int {
        bytes.append((keyed ? BinaryFormat.Tag.keyed : .unkeyed).rawValue)
        let lengthOffset = bytes.count
        appendFixed(UInt32(0))
        appendFixed(UInt32(0))
        open.append(OpenContainer(lengthOffset: lengthOffset, count: 0, isKeyed: keyed))
        return open.count - 1
    }

    /// Prepares container `index` for its next entry: closes every container opened inside it.
    func beginEntry(in index: Int) {
        close(downTo: index + 1)
        open[index].count += 1
    }

    private func close(downTo depth: Int) {
        while open.count > depth {
            let container = open.removeLast()
            let bodyLength = bytes.count - (container.lengthOffset + 8)
            if bodyLength > Int(UInt32.max) { tooLarge = true }
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: bodyLength).littleEndian) { raw in
                for (offset, byte) in raw.enumerated() { bytes[container.lengthOffset + offset] = byte }
            }
            withUnsafeBytes(of: container.count.littleEndian) { raw in
                for (offset, byte) in raw.enumerated() { bytes[container.lengthOffset + 4 + offset] = byte }
            }
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if let index = valueContainer, index < open.count, open[index].isKeyed {
            return KeyedEncodingContainer(KeyedWriter<Key>(writer: self, index: index))
        }
        let index = openContainer(keyed: true)
        valueContainer = index
        return KeyedEncodingContainer(KeyedWriter<Key>(writer: self, index: index))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if let index = valueContainer, index < open.count, !open[index].isKeyed {
            return UnkeyedWriter(writer: self, index: index)
        }
        let index = openContainer(keyed: false)
        valueContainer = index
        return UnkeyedWriter(writer: self, index: index)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueWriter(writer: self)
    }

    func count(of index: Int) -> Int { Int(open[index].count) }
}

private struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: BinaryValueWriter
    let index: Int
    var codingPath: [any CodingKey] { [] }

    private func key(_ key: Key) {
        writer.beginEntry(in: index)
        writer.appendKey(key.stringValue)
    }

    mutating func encodeNil(forKey key: Key) throws { self.key(key); writer.bytes.append(BinaryFormat.Tag.null.rawValue) }
    mutating func encode(_ value: Bool, forKey key: Key) throws {
        self.key(key)
        writer.bytes.append((value ? BinaryFormat.Tag.true : .false).rawValue)
    }
    mutating func encode(_ value: String, forKey key: Key) throws { self.key(key); writer.appendString(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        self.key(key)
        writer.bytes.append(BinaryFormat.Tag.double.rawValue)
        writer.appendFixed(value.bitPattern)
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        self.key(key)
        writer.bytes.append(BinaryFormat.Tag.float.rawValue)
        writer.appendFixed(value.bitPattern)
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { self.key(key); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { self.key(key); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { self.key(key); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { self.key(key); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { self.key(key); writer.appendSigned(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { self.key(key); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { self.key(key); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { self.key(key); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { self.key(key); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { self.key(key); writer.appendUnsigned(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { self.key(key); try writer.encodeValue(value) }

    // Optionals are written as an explicit nil, so decoding stays a sequential read.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) } }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) } }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) } }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) } }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        self.key(key)
        return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, index: writer.openContainer(keyed: true)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        self.key(key)
        return UnkeyedWriter(writer: writer, index: writer.openContainer(keyed: false))
    }

    mutating func superEncoder() -> any Encoder { superEncoder(forKey: Key(stringValue: "super")!) }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        self.key(key)
        return NestedValueEncoder(writer: writer)
    }
}

private struct UnkeyedWriter: UnkeyedEncodingContainer {
    let writer: BinaryValueWriter
    let index: Int
    var codingPath: [any CodingKey] { [] }
    var count: Int { writer.count(of: index) }

    private func entry() { writer.beginEntry(in: index) }

    mutating func encodeNil() throws { entry(); writer.bytes.append(BinaryFormat.Tag.null.rawValue) }
    mutating func encode(_ value: Bool) throws { entry(); writer.bytes.append((value ? BinaryFormat.Tag.true : .false).rawValue) }
    mutating func encode(_ value: String) throws { entry(); writer.appendString(value) }
    mutating func encode(_ value: Double) throws {
        entry()
        writer.bytes.append(BinaryFormat.Tag.double.rawValue)
        writer.appendFixed(value.bitPattern)
    }
    mutating func encode(_ value: Float) throws {
        entry()
        writer.bytes.append(BinaryFormat.Tag.float.rawValue)
        writer.appendFixed(value.bitPattern)
    }
    mutating func encode(_ value: Int) throws { entry(); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int8) throws { entry(); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int16) throws { entry(); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int32) throws { entry(); writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int64) throws { entry(); writer.appendSigned(value) }
    mutating func encode(_ value: UInt) throws { entry(); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { entry(); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { entry(); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { entry(); writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { entry(); writer.appendUnsigned(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { entry(); try writer.encodeValue(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        entry()
        return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, index: writer.openContainer(keyed: true)))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        entry()
        return UnkeyedWriter(writer: writer, index: writer.openContainer(keyed: false))
    }

    mutating func superEncoder() -> any Encoder {
        entry()
        return NestedValueEncoder(writer: writer)
    }
}

private struct SingleValueWriter: SingleValueEncodingContainer {
    let writer: BinaryValueWriter
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil() throws { writer.bytes.append(BinaryFormat.Tag.null.rawValue) }
    mutating func encode(_ value: Bool) throws { writer.bytes.append((value ? BinaryFormat.Tag.true : .false).rawValue) }
    mutating func encode(_ value: String) throws { writer.appendString(value) }
    mutating func encode(_ value: Double) throws {
        writer.bytes.append(BinaryFormat.Tag.double.rawValue)
        writer.appendFixed(value.bitPattern)
    }
    mutating func encode(_ value: Float) throws {
        writer.bytes.append(BinaryFormat.Tag.float.rawValue)
        writer.appendFixed(value.bitPattern)
    }
    mutating func encode(_ value: Int) throws { writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int8) throws { writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int16) throws { writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int32) throws { writer.appendSigned(Int64(value)) }
    mutating func encode(_ value: Int64) throws { writer.appendSigned(value) }
    mutating func encode(_ value: UInt) throws { writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { writer.appendUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { writer.appendUnsigned(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try writer.encodeValue(value) }
}

/// The encoder a `superEncoder` hands out: its first container becomes the entry's value.
private struct NestedValueEncoder: Encoder {
    let writer: BinaryValueWriter
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedWriter<Key>(writer: writer, index: writer.openContainer(keyed: true)))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedWriter(writer: writer, index: writer.openContainer(keyed: false))
    }
    func singleValueContainer() -> any SingleValueEncodingContainer { SingleValueWriter(writer: writer) }
}
