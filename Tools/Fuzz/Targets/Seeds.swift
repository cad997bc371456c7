#if DEBUG
import Foundation
import HTTPTypes
@testable import Strata
@testable import StrataOutbox
@testable import StrataProxy

/// The inputs each target's corpus started from: the shapes the parser is meant for, edge cases from
/// the RFCs, and valid encodings (which a fuzzer would take long to find behind a checksum).
enum Seeds {
    static func texts(_ texts: [String]) -> [(name: String, bytes: [UInt8])] {
        texts.enumerated().map { (name: "seed-\($0.offset)", bytes: Array($0.element.utf8)) }
    }

    /// `prefix` bytes (the shape choices of a structure-aware target) before each text.
    static func texts(after prefix: [UInt8], _ texts: [String]) -> [(name: String, bytes: [UInt8])] {
        texts.enumerated().map { (name: "seed-\($0.offset)", bytes: prefix + Array($0.element.utf8)) }
    }

    static let cacheControl: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        texts([
            "max-age=60", "no-store", "no-cache", "public, max-age=3600, s-maxage=60, stale-while-revalidate=30",
            "private=\"Set-Cookie, X-Token\", no-cache=\"a\\\"b\"", "max-age=\"120\"", "max-age=99999999999999999999",
            "MAX-AGE = 5 ,,", "max-stale, min-fresh=10, only-if-cached, must-revalidate, proxy-revalidate, stale-if-error=300",
            "max-age=-1, max-age=10", "max-age=1.5", "\"unterminated, max-age=5",
        ])
    }

    static let httpDate: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        let prefix = [UInt8](repeating: 0, count: 4) + [0x2E, 0xBB, 0x3E, 0x61] + [0x4D, 0x00]
        return texts(after: prefix, [
            "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
            "Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 29 Feb 2021 10:00:00 GMT",
            "Sat, 01 Jan 0001 00:00:00 GMT", "  Tue, 15 Nov 1994 12:45:26 GMT\t", "Wed, 09 Jun 2021 10:18:14 UTC",
        ])
    }

    static let entityTags: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        texts(["\"abc\"", "W/\"x\", \"y,z\"", "*", "\"unterminated", "a, b ,c", "W/\"\", \"\"", ",,, \"t\" ,", "Accept-Encoding, Cookie, *"])
    }

    static let targetedFields: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        func input(_ status: UInt8, _ targeted: String, _ cacheControl: String, expires: String? = nil) -> [UInt8] {
            var bytes = [status, UInt8(targeted.utf8.count)] + Array(targeted.utf8) + [UInt8(cacheControl.utf8.count)] + Array(cacheControl.utf8)
            if let expires { bytes += [1, UInt8(expires.utf8.count)] + Array(expires.utf8) } else { bytes += [0] }
            // No Vary, no Age; a GET whose Cache-Control is max-age=0.
            return bytes + [0, 0, 0, 9] + Array("max-age=0".utf8)
        }
        return [
            ("seed-0", input(0, "max-age=600", "max-age=60")),
            ("seed-1", input(0, "", "no-store")),
            ("seed-2", input(1, "no-store", "public, max-age=60", expires: "Sun, 06 Nov 1994 08:49:37 GMT")),
            ("seed-3", input(4, "  ", "s-maxage=10, stale-if-error=60")),
        ]
    }

    static let fileEnvelope: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        [
            ("seed-plain", Array(EntryEnvelope.encode(key: "feed", storedAt: Date(timeIntervalSinceReferenceDate: 7), validators: .none, payload: Data("[1,2,3]".utf8)))),
            (
                "seed-validators",
                Array(EntryEnvelope.encode(
                    key: "posts/1", storedAt: Date(timeIntervalSinceReferenceDate: 700_000_000.5),
                    validators: CacheValidators(etag: "\"v1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", maxAge: .seconds(60)),
                    payload: Data()))
            ),
            ("seed-structured", [7] + Array("posts/1".utf8) + [0x12, 0x34, 0x56, 0x78, 0x9A, 1, 2, 0x22, 0x76, 1, 1, 0, 60, 0] + Array("payload".utf8)),
        ]
    }

    static let fileIndex: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        [
            ("seed-empty", [2]),
            ("seed-entries", [1, 1, 0, 3, 1, 2, 3, 1, 1, 4, 9, 9, 9, 9, 1, 2, 1, 3, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 0, 3, 1]),
            ("seed-damaged", [3, 1, 1, 2, 7, 7, 1, 3, 5, 1, 1, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0, 1, 1]),
        ]
    }

    static let outboxEntry: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        let entry = OutboxEntry(
            id: UUID(uuidString: "6F0B2C3E-2D5C-4A39-9E55-1C1B5E3A9D10")!, sequence: 3, scope: "posts/7", kind: "http",
            payload: Data("{\"title\":\"hello\"}".utf8), host: "api.example.test", baseVersion: "\"v2\"",
            createdAt: Date(timeIntervalSinceReferenceDate: 700_000_000), attempts: 2,
            lastFailure: OutboxFailure(class: .transient, message: "503 Service Unavailable", status: 503, at: Date(timeIntervalSinceReferenceDate: 700_000_001)), invalidates: ["feed"])
        var seeds: [(name: String, bytes: [UInt8])] = []
        if let file = try? FileOutboxStorage.encode(entry) { seeds.append(("seed-file", Array(file))) }
        if let json = try? entry.encodedForStorage() { seeds.append(("seed-json", Array(json))) }
        if let file = try? FileOutboxStorage.encode(entry), let base = FileOutboxStorage.checksum(inHeaderOf: file) {
            seeds.append(("seed-attempt", Array(FileOutboxStorage.attemptFile(base: base, entryFile: file))))
        }
        if var damaged = try? FileOutboxStorage.encode(entry) {
            damaged[damaged.count / 2] ^= 0x20
            seeds.append(("seed-damaged", Array(damaged)))
        }
        return seeds
    }

    static let binaryCodec: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        let leaf = StorageTargets.Sample(
            id: -7, count: 3, name: "leaf", tags: [], score: nil, ratio: 0.5, flags: [:], when: Date(timeIntervalSinceReferenceDate: 0),
            link: nil, uuid: UUID(uuidString: "00000000-0000-0000-0000-000000000001")!, blob: Data(), children: [])
        let sample = StorageTargets.Sample(
            id: 42, count: 255, name: "root ✓", tags: ["a", "bb"], score: 1.25, ratio: -1, flags: ["x": true, "y": false],
            when: Date(timeIntervalSinceReferenceDate: 700_000_000), link: URL(string: "https://example.test/a?b=c"),
            uuid: UUID(uuidString: "6F0B2C3E-2D5C-4A39-9E55-1C1B5E3A9D10")!, blob: Data([0, 1, 2, 255]), children: [leaf, leaf])
        return encodings(of: [sample, leaf])
    }

    static let storedResponse: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.cacheControl] = "max-age=60"
        fields[.vary] = "Accept-Encoding"
        let response = StoredResponse(
            status: 200, headerFields: fields, body: Data("{\"ok\":true}".utf8), varyValues: ["accept-encoding": "gzip", "cookie": nil],
            tags: ["feed"], initialAgeSeconds: 3, mayServeStale: true, staleWhileRevalidate: .seconds(30))
        let index = StoredResponse.variantIndex(names: ["accept-encoding"], digests: ["abc", "def"])
        return encodings(of: [response, index])
    }

    /// Each value's BinaryCodec encoding, whole and past its header (the body the parser reads).
    static func encodings<Value: Codable>(of values: [Value]) -> [(name: String, bytes: [UInt8])] {
        var seeds: [(name: String, bytes: [UInt8])] = []
        for (index, value) in values.enumerated() {
            guard let data = try? BinaryCodec<Value>().encode(value) else { continue }
            seeds.append((name: "seed-\(index)", bytes: Array(data)))
            seeds.append((name: "seed-\(index)-body", bytes: Array(data.dropFirst(BinaryFormat.headerSize))))
        }
        return seeds
    }

    static let postgresURL: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        texts([
            "postgres://strata:s3cretPassw0rd@127.0.0.1:5432/strata?sslmode=disable",
            "postgresql://user@[::1]/db?sslmode=require", "postgres://user:pw@host:99999/db", "postgres://:pw@host/db",
            "postgres://user:pa%40ss@host/a/b", "mysql://user:pw@host/db", "postgres://user:pw@/db", "postgres://user:pw@host/db?sslmode=verify-full",
        ])
    }

    static let cliDuration: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        texts(["500ms", "30s", "10m", "2h", "7d", "1.5", "36525d", "36526d", "1e3s", "-1s", "nan", "inf", " 5 s ", "0x10s", "0.0004ms"])
    }

    static let cliByteCount: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        texts(["8MB", "512KiB", "1GB", "100B", "none", "1.5k", "0.4", "9223372036854775807", "1e19", "-1", " NONE ", "8 mb"])
    }

    static let redaction: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        texts([
            "GET https://user:pa55word@api.example.test/v1/feed?token=abc123&page=2 failed",
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
            "{\"password\": \"hunter2\", \"tokens_used\": 5}", "Set-Cookie: session=abcdef; HttpOnly",
            "https://example.test/reset/sk_live_4eC39HqLyjWDarjtT1zdp7dc/confirm", "x-api-key: AKIAIOSFODNN7EXAMPLE",
            "Optional(\"https://example.test/a;jsessionid=1234?x=1#access_token=zzz\")",
            "scope posts/ghp_16C7e42F292c6912E7710c838347Ae178B4a", "https:\\/\\/u:p@host\\/x?y=z",
        ])
    }

    static let proxyRequest: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        texts([
            "GET /feed HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            "GET /feed HTTP/1.1\r\nHost: a\r\n\r\nGET /posts HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\n\r\n",
            "POST /posts HTTP/1.1\r\nHost: a\r\nContent-Length: 14\r\nContent-Type: application/json\r\n\r\n{\"title\":\"x\"}\n",
            "POST /posts HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "GET /feed HTTP/1.1\r\nHost: a\r\nIf-None-Match: W/\"x\", \"y\"\r\nRange: bytes=0-10\r\nCache-Control: max-stale=5, only-if-cached\r\n\r\n",
            "GET /posts/1?x=%00 HTTP/1.0\r\n\r\n", "PURGE /feed HTTP/1.1\r\nHost: a\r\n\r\n", "GET /_strata/status HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET http://evil.test/feed HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
        ])
    }

    static let serverActions: @Sendable () -> [(name: String, bytes: [UInt8])] = {
        let body = Array("{\"title\":\"fuzzed post\"}".utf8)
        var seeds: [(name: String, bytes: [UInt8])] = []
        for index in 0..<8 {
            let step = UInt8(index)
            // method, path, path suffix, query, query suffix, token, host, origin?, content type?, extra line?
            let choices: [UInt8] = [step % 8, step, 0, step % 9, 0, 0, step % 3, 0, 1, step % 3, 0]
            seeds.append((name: "seed-\(index)", bytes: choices + body))
        }
        return seeds
    }
}
#endif
