import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("decoding(_:decoder:)")
struct DecodingTests {
    @Test func decoding_decodesJSONBytes() async throws {
        let sut = StubLoader<Void, Data>(.success(Data(#"{"id":1,"name":"a"}"#.utf8))).decoding(Item.self)
        #expect(try await sut.load() == itemA)
    }

    @Test func decoding_invalidBytesThrowATypedErrorSayingWhatAndWhere() async throws {
        let sut = StubLoader<Void, Data>(.success(Data(#"{"id":"one","name":"a"}"#.utf8))).decoding(Item.self)
        await #expect {
            try await sut.load()
        } throws: { error in
            guard let failure = error as? BodyDecodingError else { return false }
            return failure.type == "Item" && failure.description.contains("at .id")
        }
    }

    @Test func decoding_usesTheGivenDecoder() async throws {
        struct Stamp: Decodable, Sendable, Equatable { var at: Date }
        let json = Data(#"{"at":"2026-01-01T00:00:00Z"}"#.utf8)
        let sut = StubLoader<Void, Data>(.success(json)).decoding(Stamp.self) {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return decoder
        }
        #expect(try await sut.load() == Stamp(at: referenceDate))
    }
}
