import Foundation

/// A compact binary encoding for `Codable` values: faster to decode than JSON, for disk caches whose
/// cost is decoding rather than reading the file (see docs/BENCHMARKS.md).
///
/// ```swift
/// let store = FileStore<[FeedItem]>(directory: caches, codec: BinaryCodec())
/// ```
///
/// ## Format (version 2)
/// ```
/// "STRB"     4 bytes  magic
/// version    1 byte   (2)
/// checksum   8 bytes  little-endian hash of the body (everything after the header)
/// body:
///   value      the encoded value (below)
///   key table  LEB128 count, then each key as LEB128 length + UTF-8
///   trailer    u32 little-endian: where the key table starts, counted from the body's start
/// ```
/// A value is a one-byte tag and its payload: `0` nil, `1` false, `2` true, `3` signed integer (zigzag
/// LEB128), `4` unsigned integer (LEB128), `5` Double and `6` Float (little-endian bits), `7` string
/// (LEB128 length + UTF-8), `8` keyed container and `9` unkeyed container (u32 body length, u32 count,
/// then `key value` pairs or values, a key being its LEB128 index in the key table), `10` Date
/// (Double, seconds since 2001), `11` URL (string), `12` UUID (16 bytes), `13` Data (LEB128 length +
/// bytes), `14` a URL written before (LEB128 position of that URL's length, counted from the body's
/// start; the decoder parses each distinct URL once). Keys are written in the order the value encodes
/// them; decoding in the same order is a sequential read, any other order falls back to a lookup.
///
/// Bytes that are not a version-2 encoding of the right shape — another format, another version, a
/// damaged file, a different type — throw `DecodingError`, so stores treat them as a miss. The
/// checksum catches damage that would still parse. JSON stays Strata's default codec; choose this one
/// where load time matters (see docs/BENCHMARKS.md).
public struct BinaryCodec<Value: Codable>: Codec {
    public init() {}

    public func encode(_ value: Value) throws -> Data {
        let writer = BinaryValueWriter(bodyStart: BinaryFormat.headerSize)
        writer.bytes.reserveCapacity(256)
        writer.bytes.append(contentsOf: BinaryFormat.magic)
        writer.bytes.append(BinaryFormat.version)
        writer.bytes.append(contentsOf: [UInt8](repeating: 0, count: 8))
        try writer.encodeValue(value)
        try writer.finish()
        let checksum = writer.bytes.withUnsafeBytes { BinaryFormat.checksum(UnsafeRawBufferPointer(rebasing: $0[BinaryFormat.headerSize...])) }
        withUnsafeBytes(of: checksum.littleEndian) { raw in
            for (offset, byte) in raw.enumerated() { writer.bytes[5 + offset] = byte }
        }
        return Data(writer.bytes)
    }

    public func decode(_ data: Data) throws -> Value {
        try data.withUnsafeBytes { raw in
            guard raw.count >= BinaryFormat.headerSize, raw.prefix(4).elementsEqual(BinaryFormat.magic) else {
                throw BinaryFormat.corrupt("not a Strata binary encoding (no STRB header)")
            }
            guard raw[4] == BinaryFormat.version else {
                throw BinaryFormat.corrupt("binary encoding version \(raw[4]) is not supported (expected \(BinaryFormat.version))")
            }
            var stored: UInt64 = 0
            withUnsafeMutableBytes(of: &stored) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[5..<13])) }
            let body = UnsafeRawBufferPointer(rebasing: raw[BinaryFormat.headerSize...])
            guard UInt64(littleEndian: stored) == BinaryFormat.checksum(body) else {
                throw BinaryFormat.corrupt("checksum mismatch: the bytes were damaged")
            }
            return try Self.decodeBody(body)
        }
    }

    /// Decodes the value bytes after the header, without the checksum (the fuzz tests reach the parser
    /// through here).
    static func decodeBody(_ body: UnsafeRawBufferPointer) throws -> Value {
        // Positions are 32-bit in the format (and in the decoder's containers).
        guard body.count >= 4, body.count <= Int(UInt32.max) else {
            throw BinaryFormat.corrupt("a body of \(body.count) bytes cannot hold a value")
        }
        let tableOffset = Int(UInt32(littleEndian: body.loadUnaligned(fromByteOffset: body.count - 4, as: UInt32.self)))
        guard tableOffset <= body.count - 4 else { throw BinaryFormat.corrupt("the key table's offset \(tableOffset) is past the end") }
        let table = BinaryValueReader(UnsafeRawBufferPointer(rebasing: body[tableOffset..<(body.count - 4)]))
        try table.readKeyTable()
        guard table.position == table.end else { throw BinaryFormat.corrupt("\(table.end - table.position) bytes after the key table") }
        let reader = BinaryValueReader(UnsafeRawBufferPointer(rebasing: body[..<tableOffset]))
        reader.keys = table.keys
        let value = try reader.decodeValue(Value.self)
        guard reader.position == reader.end else {
            throw BinaryFormat.corrupt("\(reader.end - reader.position) bytes after the value")
        }
        return value
    }
}

enum BinaryFormat {
    static let magic: [UInt8] = Array("STRB".utf8)
    static let version: UInt8 = 2
    static let headerSize = 13

    enum Tag: UInt8 {
        case null = 0, `false`, `true`, signed, unsigned, double, float, string, keyed, unkeyed, date, url, uuid, data, urlReference
    }

    static func corrupt(_ reason: String, path: [any CodingKey] = []) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: path, debugDescription: reason))
    }

    /// A fast 64-bit hash of `bytes`, eight bytes at a time (not cryptographic: it detects damage).
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        let words = bytes.count / 8
        for index in 0..<words {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self))
            hash = (hash ^ word) &* 0x0000_0100_0000_01B3
            hash ^= hash >> 29
        }
        for index in (words * 8)..<bytes.count {
            hash = (hash ^ UInt64(bytes[index])) &* 0x0000_0100_0000_01B3
        }
        hash ^= hash >> 32
        return hash &* 0xBF58_476D_1CE4_E5B9
    }
}
