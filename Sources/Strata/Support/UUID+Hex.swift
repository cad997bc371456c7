import Foundation

extension UUID {
    /// The UUID in its 36-character form, lowercase (`uuidString.lowercased()`), written directly:
    /// on Linux `uuidString` goes through `snprintf`, and the outbox writes an entry's id several
    /// times per write (its key, its file name, its row).
    @_spi(StrataInternals) public var lowercasedString: String { hexString(uppercase: false) }

    /// The UUID in its 36-character form, uppercase, as `uuidString` writes it, written directly.
    @_spi(StrataInternals) public var uppercasedString: String { hexString(uppercase: true) }

    private func hexString(uppercase: Bool) -> String {
        withUnsafeBytes(of: uuid) { raw in
            String(unsafeUninitializedCapacity: 36) { buffer in
                let digits: StaticString = uppercase ? "0123456789ABCDEF" : "0123456789abcdef"
                let hex = digits.utf8Start
                var out = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        buffer[out] = UInt8(ascii: "-")
                        out += 1
                    }
                    let byte = raw[index]
                    buffer[out] = hex[Int(byte >> 4)]
                    buffer[out + 1] = hex[Int(byte & 0x0f)]
                    out += 2
                }
                return out
            }
        }
    }
}
