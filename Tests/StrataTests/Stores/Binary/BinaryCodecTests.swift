import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Every shape the codec must round-trip.
struct Everything: Codable, Equatable, Sendable {
    enum Kind: String, Codable, Sendable { case article, video }
    enum Payload: Codable, Equatable, Sendable { case text(String), count(Int), none }
    struct Author: Codable, Equatable, Sendable {
        var name: String
        var homepage: URL?
    }

    var id: UUID
    var title: String
    var published: Date
    var link: URL
    var kind: Kind
    var payload: Payload
    var author: Author?
    var tags: [String]
    var scores: [String: Double]
    var byNumber: [Int: String]
    var matrix: [[Int8]]
    var blob: Data
    var flags: Set<Bool>
    var optionalNumber: Int?
    var nothing: String?
    var extremes: [Int64]
    var unsigned: [UInt64]
    var float: Float
    var unicode: String
}

let everything = Everything(
    id: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
    title: "Strata", published: Date(timeIntervalSinceReferenceDate: 815_000_000.125),
    link: URL(string: "https://example.com/a?b=c#d")!, kind: .video, payload: .text("hi"),
    author: .init(name: "Ada", homepage: nil), tags: ["a", "", "ccc"], scores: ["x": 1.5, "y": -.infinity],
    byNumber: [1: "one", -2: "minus two"], matrix: [[1, -128], [], [127]], blob: Data([0, 255, 7]),
    flags: [true], optionalNumber: 42, nothing: nil, extremes: [.min, -1, 0, .max], unsigned: [0, .max],
    float: 3.25, unicode: "héllo 👋🏽 \u{0}")

@Suite("BinaryCodec")
struct BinaryCodecTests {
    @Test func roundTripsEveryShape() throws {
        let codec = BinaryCodec<Everything>()
        #expect(try codec.decode(codec.encode(everything)) == everything)
    }

    @Test func roundTripsTheDemoFeedAndTopLevelValues() throws {
        let feed = (0..<1000).map { Item(id: $0, name: "item \($0)") }
        #expect(try BinaryCodec<[Item]>().decode(BinaryCodec().encode(feed)) == feed)
        #expect(try BinaryCodec<Int>().decode(BinaryCodec<Int>().encode(-7)) == -7)
        #expect(try BinaryCodec<String?>().decode(BinaryCodec<String?>().encode(nil)) == nil)
        #expect(try BinaryCodec<[Item]>().decode(BinaryCodec<[Item]>().encode([])) == [])
        #expect(try BinaryCodec<Date>().decode(BinaryCodec<Date>().encode(referenceDate)) == referenceDate)
    }

    @Test func decodesKeysInAnyOrder() throws {
        struct Forward: Codable { var a: Int; var b: String; var c: Bool }
        struct Backward: Codable, Equatable {
            var c: Bool; var b: String; var a: Int
            enum CodingKeys: String, CodingKey { case c, b, a }
        }
        let bytes = try BinaryCodec<Forward>().encode(Forward(a: 1, b: "x", c: true))
        #expect(try BinaryCodec<Backward>().decode(bytes) == Backward(c: true, b: "x", a: 1))
    }

    @Test func aNewOptionalFieldReadsAsNilFromOldData() throws {
        struct Old: Codable { var a: Int }
        struct New: Codable, Equatable { var a: Int; var added: String? }
        let bytes = try BinaryCodec<Old>().encode(Old(a: 3))
        #expect(try BinaryCodec<New>().decode(bytes) == New(a: 3, added: nil))
    }

    /// Links that repeat: each distinct URL is written once, later copies are references to it.
    struct Link: Codable, Equatable, Sendable {
        var title: String
        var url: URL
        var mirror: URL?
    }

    static let links: [Link] = (0..<40).map { index in
        Link(title: "link \(index)", url: URL(string: "https://example.com/\(index % 3)")!,
             mirror: index % 2 == 0 ? nil : URL(string: "https://mirror.example.com/\(index % 3)")!)
    }

    @Test func repeatedURLsAreWrittenOnceAndReadBackAsTheSameURLs() throws {
        let codec = BinaryCodec<[Link]>()
        let bytes = try codec.encode(Self.links)
        #expect(try codec.decode(bytes) == Self.links)
        let occurrences = bytes.ranges(of: Data("https://example.com/1".utf8)).count
        #expect(occurrences == 1)
    }

    @Test func aReferenceToAURLWhoseFirstCopyWasSkippedStillReads() throws {
        struct Both: Codable { var first: URL; var second: URL }
        struct SecondOnly: Codable, Equatable { var second: URL }
        let url = URL(string: "https://example.com/shared")!
        let bytes = try BinaryCodec<Both>().encode(Both(first: url, second: url))
        #expect(try BinaryCodec<SecondOnly>().decode(bytes) == SecondOnly(second: url))
    }

    @Test func keysAreWrittenOnceNotPerEntry() throws {
        let feed = (0..<100).map { Item(id: $0, name: "item \($0)") }
        let binary = try BinaryCodec<[Item]>().encode(feed)
        #expect(binary.ranges(of: Data("name".utf8)).count == 1)
        #expect(binary.count < (try JSONEncoder().encode(feed)).count)
    }

    enum Damage: String, CaseIterable, Sendable {
        case json, previousVersion, nextVersion, flippedByte, truncated, extended, empty, otherType, badTrailer
    }

    @Test(arguments: Damage.allCases)
    func foreignOrDamagedBytesThrowADecodingError(_ damage: Damage) throws {
        let good = try BinaryCodec<[Item]>().encode([itemA, itemB])
        var bytes = good
        switch damage {
        case .json: bytes = try JSONEncoder().encode([itemA, itemB])
        case .previousVersion: bytes[4] = 1
        case .nextVersion: bytes[4] = BinaryFormat.version + 1
        case .badTrailer: bytes[bytes.count - 1] ^= 0x80
        case .flippedByte: bytes[bytes.count - 3] ^= 0x10
        case .truncated: bytes = bytes.prefix(bytes.count - 1)
        case .extended: bytes.append(0)
        case .empty: bytes = Data()
        case .otherType:
            #expect(throws: DecodingError.self) { try BinaryCodec<[String]>().decode(good) }
            return
        }
        #expect(throws: DecodingError.self) { try BinaryCodec<[Item]>().decode(bytes) }
    }

    @Test func integersThatDoNotFitAreErrors() throws {
        let bytes = try BinaryCodec<Int64>().encode(300)
        #expect(throws: DecodingError.self) { try BinaryCodec<Int8>().decode(bytes) }
        #expect(throws: DecodingError.self) { try BinaryCodec<UInt64>().decode(bytes) }
    }


    @Test(arguments: [1, 2, 3, 4])
    func fuzz_arbitraryBytesNeverCrashTheParser(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let valid = try BinaryCodec<Everything>().encode(everything).dropFirst(BinaryFormat.headerSize)
        let validLinks = try BinaryCodec<[Link]>().encode(Self.links).dropFirst(BinaryFormat.headerSize)
        for round in 0..<3_000 {
            if round % 100 == 0 { await Task.yield() }  // a long synchronous search would hold a cooperative thread
            var bytes: [UInt8]
            if round % 3 == 0 {
                bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            } else {
                // A valid body (values, key table, trailer, URL references) with a few bytes changed.
                bytes = Array(round % 3 == 1 ? valid : validLinks)
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
                if Bool.random(using: &random) { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random))) }
            }
            // The parser, without the checksum in front of it: it may throw, it must not crash or hang.
            _ = try? bytes.withUnsafeBytes { try BinaryCodec<Everything>.decodeBody($0) }
            _ = try? bytes.withUnsafeBytes { try BinaryCodec<[Item]>.decodeBody($0) }
            _ = try? bytes.withUnsafeBytes { try BinaryCodec<[Link]>.decodeBody($0) }
            // With the header, any damage is caught.
            let framed = Data(BinaryFormat.magic + [BinaryFormat.version] + [UInt8](repeating: 0, count: 8) + bytes)
            #expect(throws: DecodingError.self) { try BinaryCodec<Everything>().decode(framed) }
        }
    }

    @Test func aFileStoreWithTheBinaryCodecPassesTheStoreContract() async throws {
        let contract = StoreContract<FileStore<Item>>(
            keys: ("feed", "../../etc/passwd"), values: (itemA, itemB),
            reopen: { store in FileStore(directory: store.directory, codec: BinaryCodec()) },
            corruption: .init(
                corrupt: { store, key in try Data("garbage".utf8).write(to: store.fileURL(for: key)) },
                isStored: { store, key in FileManager.default.fileExists(atPath: store.fileURL(for: key).path) })
        ) {
            FileStore<Item>(directory: try TemporaryDirectory.scoped(), codec: BinaryCodec(), logger: quietLogger)
        }
        try await TemporaryDirectory.withScope { try await contract.verifyAll() }
    }
}
