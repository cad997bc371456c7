import Foundation
@_spi(StrataInternals) import Strata
import Testing

/// The UUID strings written directly agree with Foundation's `uuidString`, for every nibble value
/// in every position.
@Suite("UUID strings written directly")
struct UUIDHexTests {
    @Test("lowercasedString and uppercasedString are uuidString, lowercased and as it is")
    func agreeWithFoundation() {
        var generator = SystemRandomNumberGenerator()
        var uuids = [UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))]
        uuids.append(UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)))
        for nibble in 0..<16 {
            let byte = UInt8(nibble << 4 | (15 - nibble))
            uuids.append(UUID(uuid: (byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte)))
        }
        for _ in 0..<1_000 { uuids.append(UUID(uuid: (
            .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator),
            .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator),
            .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator),
            .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator),
            .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator), .random(in: 0...255, using: &generator),
            .random(in: 0...255, using: &generator)))) }
        for uuid in uuids {
            #expect(uuid.uppercasedString == uuid.uuidString)
            #expect(uuid.lowercasedString == uuid.uuidString.lowercased())
        }
    }
}
