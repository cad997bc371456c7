import ArgumentParser
import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
@testable import StrataCLI
import DemoServer
import StrataSQLite
import StrataTesting

/// What one `strata send` / `strata outbox` run printed, line by line.
final class CapturedLines: Sendable {
    private let out = Locked([String]())
    private let err = Locked([String]())
    var stdout: [String] { out.withLock { $0 } }
    var stderr: [String] { err.withLock { $0 } }
    var writeOut: @Sendable (String) -> Void { { line in self.out.withLock { $0.append(line) } } }
    var writeErr: @Sendable (String) -> Void { { line in self.err.withLock { $0.append(line) } } }
}

/// One file of a file outbox, read layer by layer: the file's text, the stored request (the entry's
/// payload, base64 in the file) and its body (base64 in the request), so a test can look for a secret
/// in each.
struct StoredOutboxFile {
    let raw: String
    let request: OutboxRequest
    let body: String

    init(_ file: URL) throws {
        let data = try Data(contentsOf: file)
        raw = String(decoding: data, as: UTF8.self)
        let newline = try #require(data.firstIndex(of: UInt8(ascii: "\n")))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        let entry = try decoder.decode(OutboxEntry.self, from: Data(data[data.index(after: newline)...]))
        request = try JSONDecoder().decode(OutboxRequest.self, from: entry.payload)
        body = String(decoding: request.body ?? Data(), as: UTF8.self)
    }

    /// The file, the request as JSON, the header fields and the body.
    var everyLayer: [String] {
        let fields = request.headerFields.map { $0.joined(separator: ": ") }
        let json = (try? JSONEncoder().encode(request)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return [raw, json, body] + fields
    }
}

/// `strata send` and `strata outbox`, run in-process (``Sender``, ``OutboxTool``) against the real
/// demo server, with the outbox in real files in a temporary cache directory. Time is a manual clock:
/// it stamps entries and decides which are due; nothing waits for it.
@Suite("strata send and strata outbox", .timeLimit(.minutes(3)))
final class OutboxCLITests {
    let directory: TemporaryDirectory
    let clock = ManualClock()
    /// The store the outbox is kept in; parameterised tests set it first.
    var store = Fetcher.StoreKind.file
    /// The database for `store == .postgres`; the table is the tests' own.
    var postgresURL: String?
    var location: OutboxLocation {
        // Connecting (SCRAM) can take seconds on two busy cores; the library's PostgreSQL tests wait
        // as long. No test here is about the connect timeout.
        OutboxLocation(
            cacheDirectory: directory.url, store: store, postgresURL: postgresURL, postgresTable: "strata_cli_outbox_tests",
            postgresConnectTimeout: .seconds(60))
    }

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-outbox-cli")
    }

    /// The demo server's answer to a write under its `unprocessable` write fault.
    static let unprocessableProblem = #"{"detail":"injected write fault: the write was rejected as invalid","status":422,"#
        + #""title":"Unprocessable Content","type":"https://strata.example/problems/validation-failed"}"#

    static let post = Data(#"{"title":"Offline","body":"written on a train"}"#.utf8)

    func send(
        _ url: URL, method: HTTPRequest.Method = .post, body: Data? = OutboxCLITests.post, headers: HTTPFields = [.contentType: "application/json"],
        scope: String? = nil, ifMatch: String? = nil
    ) async -> (code: OutboxExitCode, output: CapturedLines) {
        let output = CapturedLines()
        let options = Sender.Options(
            method: method, url: url, headerFields: headers, body: body, scope: scope, ifMatch: ifMatch,
            // Generous: a real request to the in-process server (see FetchTests); no test here is about it.
            timeout: .seconds(90), location: location)
        let code = await Sender(options: options, environment: clock.environment(logger: quietLogger))
            .run(stdout: output.writeOut, stderr: output.writeErr)
        return (code, output)
    }

    func outbox(_ action: OutboxTool.Action) async -> (code: OutboxExitCode, output: CapturedLines) {
        let output = CapturedLines()
        let code = await OutboxTool(location: location, environment: clock.environment(logger: quietLogger))
            .run(action, stdout: output.writeOut, stderr: output.writeErr)
        return (code, output)
    }

    func drain(credentials: [HTTPField] = []) async -> (code: OutboxExitCode, output: CapturedLines) {
        await outbox(.drain(timeout: .seconds(90), credentials: credentials))
    }

    /// The id in the first line of a command's output (see ``id(in:stderr:)``); what it wrote to
    /// standard error is reported when there is none.
    func id(in output: CapturedLines) throws -> String {
        try id(in: output.stdout.first, stderr: output.stderr)
    }

    /// The id in a result line: `sent 201 ID`, `queued ID: …`, `parked ID: …`.
    func id(in line: String?, stderr: [String] = []) throws -> String {
        let words = try #require(line, "no result line; standard error: \(stderr)").split(separator: " ")
        let word = words.first == "sent" ? words[2] : words[1]
        return String(word.hasSuffix(":") ? word.dropLast() : word)
    }

    /// The entry files of the file outbox (not its `.coordination` file, which holds no entry).
    func outboxFiles() throws -> [URL] {
        let folder = location.fileDirectory
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.lastPathComponent != ".coordination" }
    }

    /// The requests the server received carrying `Idempotency-Key: key`.
    func requests(withKey key: String, on server: DemoServer) -> [DemoServer.RecordedRequest] {
        server.requests.filter { request in
            request.headers.contains { $0.key.lowercased() == "idempotency-key" && $0.value == key }
        }
    }

    // MARK: sent

    @Test func online_isSentOnceWithItsIdempotencyKey_andLeavesNothingQueued() async throws {
        try await withDemoServer { server in
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"))

            #expect(code == .ok)
            let id = try id(in: output)
            #expect(output.stdout == ["sent 201 \(id)"])
            #expect(output.stderr.isEmpty)
            #expect(server.posts.values.map(\.title) == ["Offline"])
            #expect(requests(withKey: id, on: server).count == 1)
            #expect(try outboxFiles().filter { $0.pathExtension == "outbox" }.isEmpty)
            #expect(await outbox(.count(json: false)).output.stdout == ["0 pending, 0 parked"])
        }
    }

    // MARK: queued, then drained

    @Test(arguments: [Fetcher.StoreKind.file, .sqlite])
    func nothingListening_isQueued_thenDrainDeliversItOnce(store: Fetcher.StoreKind) async throws {
        self.store = store
        try await withDemoServer { server in
            await server.goOffline()
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"))

            #expect(code == .ok, "queued is a success: the write is safe")
            let id = try id(in: output)
            #expect(output.stdout == [
                "queued \(id): the server could not be reached (could not connect (connection refused)); will be sent by 'strata outbox drain'",
            ])
            let listed = await outbox(.list(json: false)).output.stdout
            #expect(listed.count == 1)
            #expect(listed.first?.hasPrefix("\(id) pending scope=/posts POST \(server.baseURL.absoluteString)/posts attempts=1 next=") == true)
            #expect(listed.first?.contains("error=unreachable: ") == true)

            try await server.goOnline()
            let drained = await drain()

            #expect(drained.code == .ok)
            #expect(drained.output.stdout == ["sent 201 \(id)"])
            #expect(drained.output.stderr == ["strata outbox drain: drained: 1 delivered, 0 parked, 0 deferred, 0 waiting"])
            #expect(server.posts.count == 1)
            #expect(requests(withKey: id, on: server).count == 1)

            let again = await drain()
            #expect(again.code == .ok)
            #expect(again.output.stdout.isEmpty)
            #expect(server.posts.count == 1, "the server recorded the write exactly once")
        }
    }

    @Test func theSameSendAgain_withItsIdempotencyKey_isTheSameEntry_neverASecondCopy() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let key = UUID().uuidString.lowercased()
            var headers: HTTPFields = [.contentType: "application/json"]
            headers[HTTPField.Name("Idempotency-Key")!] = key
            let first = await send(server.baseURL.appendingPathComponent("posts"), headers: headers)
            let again = await send(server.baseURL.appendingPathComponent("posts"), headers: headers)

            #expect(first.code == .ok && again.code == .ok)
            #expect(try id(in: first.output) == key, "the request's own key is the entry's id")
            #expect(try id(in: again.output) == key)
            #expect(try outboxFiles().filter { $0.pathExtension == "outbox" }.count == 1, "one entry, not two")

            try await server.goOnline()
            clock.advance(by: .seconds(3600))
            #expect(await drain().output.stdout == ["sent 201 \(key)"])
            #expect(server.posts.count == 1)
        }
    }

    @Test func transientServerError_isQueued_andWaitsForItsBackoff() async throws {
        try await withDemoServer { server in
            server.faults = .init(writeFault: .status(503))
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"))

            #expect(code == .ok)
            let id = try id(in: output)
            #expect(output.stdout == ["queued \(id): the server answered HTTP 503, a transient failure; will be sent by 'strata outbox drain'"])

            server.faults = .none
            let early = await drain()
            #expect(early.code == .deferred, "a 503 backs off; an explicit drain does not skip the wait")
            #expect(early.output.stdout.count == 1)
            #expect(early.output.stdout.first?.hasPrefix("waiting \(id): backing off after transient: HTTP 503") == true)
            #expect(server.posts.isEmpty)

            clock.advance(by: .seconds(600))
            let late = await drain()
            #expect(late.code == .ok)
            #expect(late.output.stdout == ["sent 201 \(id)"])
            #expect(server.posts.count == 1)
        }
    }

    @Test func aWriteBehindAnEarlierOneOfItsScope_isQueued_andTheDrainKeepsTheirOrder() async throws {
        try await withDemoServer { server in
            let url = server.baseURL.appendingPathComponent("posts")
            await server.goOffline()
            let first = try id(in: await send(url, body: Data(#"{"title":"first","body":"1"}"#.utf8)).output.stdout.first)
            try await server.goOnline()

            let (code, output) = await send(url, body: Data(#"{"title":"second","body":"2"}"#.utf8))
            let second = try id(in: output)

            #expect(code == .ok)
            #expect(output.stdout == [
                "queued \(second): 1 earlier write to scope /posts must be delivered first; will be sent by 'strata outbox drain'",
            ])
            #expect(server.posts.isEmpty, "not sent ahead of the earlier write")

            let drained = await drain()
            #expect(drained.code == .ok)
            #expect(drained.output.stdout == ["sent 201 \(first)", "sent 201 \(second)"])
            #expect(server.posts[1]?.title == "first")
            #expect(server.posts[2]?.title == "second")
        }
    }

    @Test func drain_reportsEachWrite_andItsExitCodeSaysTheWorstThatHappened() async throws {
        try await withDemoServer { server in
            let url = server.baseURL.appendingPathComponent("posts")
            await server.goOffline()
            let first = try id(in: await send(url, scope: "first").output.stdout.first)
            let second = try id(in: await send(url, scope: "second").output.stdout.first)

            // Still offline: both deferred, exit 75.
            let offline = await drain()
            #expect(offline.code == .deferred)
            #expect(offline.code.rawValue == 75)
            #expect(offline.output.stdout.count == 2)
            for id in [first, second] {
                // The backoff is jittered: the next attempt is within the first seconds after the clock's start.
                let prefix = "deferred \(id): the server could not be reached (could not connect (connection refused)); next attempt 2026-01-01T00:00:0"
                #expect(offline.output.stdout.contains { $0.hasPrefix(prefix) }, "\(offline.output.stdout)")
            }
            #expect(offline.output.stderr == ["strata outbox drain: drained: 0 delivered, 0 parked, 2 deferred, 0 waiting"])

            // Online, the next write refused: one sent, one parked, exit 2.
            try await server.goOnline()
            server.faults = .init(writeFault: .unprocessable, remainingWriteFaults: 1)
            let online = await drain()
            #expect(online.code == .parked)
            #expect(online.output.stderr.last == "strata outbox drain: drained: 1 delivered, 1 parked, 0 deferred, 0 waiting")
            let sentLine = try #require(online.output.stdout.first { $0.hasPrefix("sent 201 ") })
            let parkedLine = try #require(online.output.stdout.first { $0.hasPrefix("parked ") })
            #expect(Set([try id(in: sentLine), try id(in: parkedLine)]) == [first, second])
            #expect(parkedLine.hasSuffix(": HTTP 422, rejected by the server"))
            #expect(server.posts.count == 1)
        }
    }

    // MARK: dead letters

    @Test(arguments: [Fetcher.StoreKind.file, .sqlite])
    func unprocessable_isParked_listed_retried_thenDrained(store: Fetcher.StoreKind) async throws {
        self.store = store
        try await withDemoServer { server in
            server.faults = .init(writeFault: .unprocessable)
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"))

            #expect(code == .parked)
            #expect(code.rawValue == 2)
            let id = try id(in: output)
            #expect(output.stdout == [
                "parked \(id): HTTP 422, rejected by the server; 'strata outbox retry \(id)' sends it again, 'strata outbox discard \(id)' removes it",
            ])
            #expect(output.stderr == [
                "strata send: POST \(server.baseURL.absoluteString)/posts was refused: HTTP 422: " + Self.unprocessableProblem,
            ])

            let listed = await outbox(.list(json: false)).output.stdout
            #expect(listed == [
                "\(id) parked:rejected scope=/posts POST \(server.baseURL.absoluteString)/posts attempts=1 next=- error=HTTP 422: "
                    + Self.unprocessableProblem,
            ])
            #expect(await outbox(.count(json: false)).output.stdout == ["0 pending, 1 parked"])

            let retried = await outbox(.retry(idPrefix: String(id.prefix(13))))
            #expect(retried.code == .ok)
            #expect(retried.output.stdout == ["retried \(id): pending again, attempts reset; 'strata outbox drain' sends it"])
            #expect(await outbox(.count(json: true)).output.stdout == [#"{"parked":0,"pending":1}"#])

            server.faults = .none
            let drained = await drain()
            #expect(drained.code == .ok)
            #expect(drained.output.stdout == ["sent 201 \(id)"])
            #expect(server.posts.count == 1)
            #expect(await outbox(.count(json: false)).output.stdout == ["0 pending, 0 parked"])
        }
    }

    @Test func aParkedWrite_isDiscarded_andNeverSent() async throws {
        try await withDemoServer { server in
            server.faults = .init(writeFault: .status(400))
            let id = try id(in: await send(server.baseURL.appendingPathComponent("posts")).output.stdout.first)

            let discarded = await outbox(.discard(idPrefix: id.uppercased()))

            #expect(discarded.code == .ok)
            #expect(discarded.output.stdout == [
                "discarded \(id): POST \(server.baseURL.absoluteString)/posts, parked because HTTP 400, rejected by the server; it will not be sent",
            ])
            #expect(try outboxFiles().filter { $0.pathExtension == "outbox" }.isEmpty)
            server.faults = .none
            #expect(await drain().output.stdout.isEmpty)
            #expect(server.posts.isEmpty)
            #expect(await outbox(.discard(idPrefix: id)).code == .noSuchEntry)
        }
    }

    @Test(arguments: [Fetcher.StoreKind.file, .sqlite])
    func aPendingWrite_cannotBeDiscardedOrRetried(store: Fetcher.StoreKind) async throws {
        self.store = store
        try await withDemoServer { server in
            await server.goOffline()
            let id = try id(in: await send(server.baseURL.appendingPathComponent("posts")).output.stdout.first)

            let discard = await outbox(.discard(idPrefix: id))
            #expect(discard.code == .notParked)
            #expect(discard.code.rawValue == 5)
            #expect(discard.output.stdout.isEmpty)
            #expect(discard.output.stderr == [
                "strata outbox discard: refused: \(id) is pending, not a dead letter; only parked writes can be discarded "
                    + "(a pending write may still be delivered). Nothing was removed.",
            ])
            let retry = await outbox(.retry(idPrefix: id))
            #expect(retry.code == .notParked)
            #expect(await outbox(.count(json: false)).output.stdout == ["1 pending, 0 parked"])

            try await server.goOnline()
            #expect(await drain().output.stdout == ["sent 201 \(id)"])
        }
    }

    @Test func ifMatch_thatNoLongerMatches_isAConflict_parkedWithItsOwnExitCode() async throws {
        try await withDemoServer { server in
            #expect(await send(server.baseURL.appendingPathComponent("posts")).code == .ok)
            let (code, output) = await send(
                server.baseURL.appendingPathComponent("posts/1"), method: .put,
                body: Data(#"{"title":"edited","body":"against an old version"}"#.utf8), ifMatch: #""an-old-version""#)

            #expect(code == .conflict)
            #expect(code.rawValue == 3)
            let id = try id(in: output)
            #expect(output.stdout.first?.hasPrefix("parked \(id): HTTP 412, conflict;") == true)
            #expect(output.stderr.first?.contains("Precondition Failed") == true)
            let sent = try #require(requests(withKey: id, on: server).first)
            #expect(sent.headers.first { $0.key.lowercased() == "if-match" }?.value == #""an-old-version""#)
            #expect(server.posts[1]?.title == "Offline", "the server did not apply it")
            #expect(await outbox(.list(json: false)).output.stdout.first?.contains(" parked:conflict scope=/posts/1 PUT ") == true)
        }
    }

    @Test func aLostAcknowledgement_isQueued_andTheDrainsRepeatIsNotAppliedTwice() async throws {
        try await withDemoServer { server in
            // The server applies the write, then drops the connection without answering.
            server.faults = .init(writeFault: .dropAfterApply, remainingWriteFaults: 1)
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"))

            #expect(code == .ok)
            let id = try id(in: output)
            #expect(output.stdout.first?.hasPrefix("queued \(id): the server could not be reached (") == true)
            #expect(server.appliedWrites.count == 1)

            let drained = await drain()
            #expect(drained.code == .ok)
            #expect(drained.output.stdout == ["sent 201 \(id)"])
            let record = try #require(server.idempotencyKey(id))
            #expect(record.requests == 2)
            #expect(record.applied == 1)
            #expect(record.replayed == 1)
            #expect(server.appliedWrites.count == 1)
            #expect(server.posts.count == 1)
        }
    }

    @Test func idPrefixes_thatMatchNoneOrSeveral_areRefused() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            _ = await send(server.baseURL.appendingPathComponent("posts"))
            _ = await send(server.baseURL.appendingPathComponent("comments"))

            let unknown = await outbox(.retry(idPrefix: "ffff"))
            #expect(unknown.code == .noSuchEntry)
            #expect(unknown.output.stderr == ["strata outbox retry: no entry's id starts with 'ffff' ('strata outbox list' shows the ids)"])

            // Both ids are UUIDv7s of the same millisecond (the clock did not move): one prefix fits both.
            let ambiguous = await outbox(.discard(idPrefix: "0"))
            #expect(ambiguous.code == .noSuchEntry)
            #expect(ambiguous.output.stderr.first?.contains("'0' is the start of 2 ids") == true)
        }
    }

    // MARK: credentials

    @Test func credentials_areSentNow_butNeverWrittenToTheOutbox() async throws {
        try await withDemoServer { server in
            let secret = "Bearer s3cr3t-token-for-the-outbox-test"
            var headers: HTTPFields = [.contentType: "application/json", .authorization: secret]
            headers[.cookie] = "session=cookie-value-never-stored"
            await server.goOffline()
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"), headers: headers)
            let id = try id(in: output)
            #expect(code == .ok)

            // On disk: the write, without the credentials.
            let files = try outboxFiles()
            #expect(files.count == 1)
            let stored = try StoredOutboxFile(try #require(files.first))
            #expect(stored.body.contains("written on a train"))
            for text in stored.everyLayer {
                #expect(!text.contains("s3cr3t"))
                #expect(!text.contains("cookie-value"))
            }
            #expect(stored.request.headerFields.map { $0[0] } == ["Content-Type", "Strata-Withheld-Credentials"])
            let listed = await outbox(.list(json: false)).output.stdout
            #expect(listed.first?.contains(" credentials-not-kept=Authorization,Cookie ") == true)
            let json = try #require(await outbox(.list(json: true)).output.stdout.first)
            let objects = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
            #expect(objects.first?["credentialsNotKept"] as? [String] == ["Authorization", "Cookie"])

            // drain -H gives the Authorization back (only to a write queued with one); the marker never leaves.
            try await server.goOnline()
            let drained = await drain(credentials: [HTTPField(name: .authorization, value: "Bearer renewed-token")])
            #expect(drained.output.stdout == ["sent 201 \(id)"])
            let request = try #require(requests(withKey: id, on: server).first)
            let names = request.headers.keys.map { $0.lowercased() }
            #expect(request.headers.first { $0.key.lowercased() == "authorization" }?.value == "Bearer renewed-token")
            #expect(!names.contains("cookie"), "no cookie was given to the drain")
            #expect(!names.contains("strata-withheld-credentials"))
        }
    }

    @Test func credentials_given_toSend_reachTheServerOnItsOwnAttempt() async throws {
        try await withDemoServer { server in
            let headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer sent-at-once"]
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"), headers: headers)
            let id = try id(in: output)

            #expect(code == .ok)
            let request = try #require(requests(withKey: id, on: server).first)
            #expect(request.headers.first { $0.key.lowercased() == "authorization" }?.value == "Bearer sent-at-once")
            #expect(!request.headers.keys.contains { $0.lowercased() == "strata-withheld-credentials" })
        }
    }

    @Test func aDrain_neverGivesACredentialToAWriteQueuedWithoutOne() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let id = try id(in: await send(server.baseURL.appendingPathComponent("posts")).output.stdout.first)
            try await server.goOnline()

            _ = await drain(credentials: [HTTPField(name: .authorization, value: "Bearer not-for-this-write")])

            let request = try #require(requests(withKey: id, on: server).first)
            #expect(!request.headers.keys.contains { $0.lowercased() == "authorization" })
        }
    }

    // MARK: the store

    @Test func sqlite_theOutboxSharesTheFetchCachesFile_andKeepsNoCredential() async throws {
        store = .sqlite
        try await withDemoServer { server in
            // strata fetch --store sqlite caches the feed in <cache-dir>/fetch.sqlite ...
            var fetchOptions = Fetcher.Options(url: server.feedURL, cacheDirectory: directory.url, retries: 0, timeout: .seconds(90))
            fetchOptions.store = .sqlite
            let fetched = CapturedOutput()
            #expect(await Fetcher(options: fetchOptions, now: clock.wallClock).run(stdout: fetched.stdout, stderr: fetched.stderr) == .served)

            // ... and strata send --store sqlite queues in the same file.
            await server.goOffline()
            let headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer sqlite-secret-value"]
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"), headers: headers)
            let id = try id(in: output)
            #expect(code == .ok)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { !$0.hasPrefix("fetch.sqlite") }.isEmpty)
            let entries = try await SQLiteOutboxStorage(path: location.sqliteFile, logger: quietLogger).loadAll()
            #expect(entries.map(\.idempotencyKey) == [id])
            let request = try JSONDecoder().decode(OutboxRequest.self, from: try #require(entries.first).payload)
            #expect(request.headerFields == [["Content-Type", "application/json"], ["Strata-Withheld-Credentials", "Authorization"]])
            #expect(!String(decoding: try JSONEncoder().encode(request), as: UTF8.self).contains("sqlite-secret"))

            // The cache still serves from the same file.
            let stale = CapturedOutput()
            #expect(await Fetcher(options: fetchOptions, now: clock.wallClock).run(stdout: stale.stdout, stderr: stale.stderr) == .served)
            #expect(stale.body == fetched.body)
        }
    }

    @Test func postgres_withoutADatabaseURL_isAUsageError() async throws {
        store = .postgres
        let (code, output) = await send(URL(string: "http://127.0.0.1:1/posts")!)
        #expect(code == .usage)
        #expect(output.stdout.isEmpty)
        #expect(output.stderr.first?.contains("--store postgres needs --postgres-url or the STRATA_POSTGRES_URL environment variable") == true)
    }

    @Test func postgres_unreachable_queuesNothing_andNamesNoPassword() async throws {
        let output = CapturedLines()
        var location = OutboxLocation(cacheDirectory: directory.url, store: .postgres, postgresURL: "postgres://u:pg-secret@127.0.0.1:1/db")
        location.postgresTable = "strata_cli_outbox_unreachable"
        let options = Sender.Options(method: .post, url: URL(string: "http://127.0.0.1:1/posts")!, body: Self.post, location: location)
        let code = await Sender(options: options, environment: clock.environment(logger: quietLogger))
            .run(stdout: output.writeOut, stderr: output.writeErr)

        #expect(code == .storage)
        #expect(output.stdout.isEmpty)
        #expect(output.stderr.first?.hasPrefix("strata send: not queued, nothing sent: outbox storage failed") == true, "\(output.stderr)")
        #expect(!output.stderr.joined().contains("pg-secret"))
    }

    static let postgresURL = ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    /// The queue, the drain and a dead letter with the outbox in a PostgreSQL table (one of its own,
    /// emptied before and after).
    @Test(.enabled(if: postgresURL != nil || ProcessInfo.processInfo.environment["CI"] == "true", SharedCacheTests.postgresSkipReason))
    func postgres_queued_thenDrained_andNoCredentialStored() async throws {
        let url = try #require(Self.postgresURL, "CI=true but STRATA_POSTGRES_URL is not set: .ci/run must start PostgreSQL")
        store = .postgres
        postgresURL = url
        let opened = try await location.open(logger: quietLogger)
        func empty() async throws {
            for entry in try await opened.storage.loadAll() { try await opened.storage.remove(entry.id) }
        }
        do {
            try await empty()
            try await withDemoServer { server in
                await server.goOffline()
                let headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer postgres-secret-value"]
                let (code, output) = await send(server.baseURL.appendingPathComponent("posts"), headers: headers)
                let id = try id(in: output)
                #expect(code == .ok)
                #expect(output.stdout.first?.hasPrefix("queued \(id): the server could not be reached") == true)

                let stored = try await opened.storage.loadAll()
                #expect(stored.map(\.idempotencyKey) == [id])
                let request = try JSONDecoder().decode(OutboxRequest.self, from: try #require(stored.first).payload)
                #expect(request.headerFields == [["Content-Type", "application/json"], ["Strata-Withheld-Credentials", "Authorization"]])

                try await server.goOnline()
                let drained = await drain(credentials: [HTTPField(name: .authorization, value: "Bearer postgres-secret-value")])
                #expect(drained.code == .ok)
                #expect(drained.output.stdout == ["sent 201 \(id)"])
                #expect(server.idempotencyKey(id)?.applied == 1)

                server.faults = .init(writeFault: .unprocessable)
                let parked = await send(server.baseURL.appendingPathComponent("posts"))
                #expect(parked.code == .parked)
                #expect(await outbox(.count(json: false)).output.stdout == ["0 pending, 1 parked"])
                let parkedID = try self.id(in: parked.output)
                #expect(await outbox(.discard(idPrefix: parkedID)).code == .ok)
                #expect(await outbox(.count(json: false)).output.stdout == ["0 pending, 0 parked"])
            }
        } catch {
            try? await empty()
            await opened.close()
            throw error
        }
        try await empty()
        await opened.close()
    }

    @Test func anUnwritableOutbox_queuesNothing_andSendsNothing() async throws {
        try await withDemoServer { server in
            // The outbox folder's place is taken by a file: nothing can be saved there.
            try Data("not a folder".utf8).write(to: location.fileDirectory)
            let (code, output) = await send(server.baseURL.appendingPathComponent("posts"))

            #expect(code == .storage)
            #expect(output.stdout.isEmpty)
            #expect(output.stderr.first?.hasPrefix("strata send: not queued, nothing sent: outbox storage failed") == true)
            #expect(server.posts.isEmpty)
        }
    }
}

/// The parsing and help of `strata send` and `strata outbox`.
@Suite("strata send and outbox: command line", .timeLimit(.minutes(3)))
struct OutboxCommandLineTests {
    @Test(arguments: [
        ["send", "GET", "http://example.com/x"], ["send", "POST", "notaurl"], ["send", "POST", "ftp://example.com/x"],
        ["send", "POST", "http://example.com/x", "-H", "no colon"], ["send", "POST", "http://example.com/x", "-H", "Bad Name: v"],
        ["send", "POST", "http://example.com/x", "-H", "Idempotency-Key: mine"], ["send", "POST", "http://example.com/x", "--data", "@/no/such/file"],
        ["send", "POST", "http://example.com/x", "--timeout", "0s"], ["send", "B@D", "http://example.com/x"],
        ["outbox", "drain", "-H", "X-Custom: 1"], ["outbox", "retry"], ["outbox", "nope"],
    ])
    func badArguments_areUsageErrors(arguments: [String]) {
        do {
            _ = try StrataCommand.parseAsRoot(arguments)
            Issue.record("expected \(arguments) to be rejected")
        } catch {
            #expect(StrataCommand.exitCode(for: error).rawValue == OutboxExitCode.usage.rawValue)
            #expect(!StrataCommand.message(for: error).isEmpty)
        }
    }

    @Test func sendAndOutbox_documentTheirExitCodes() {
        for command in [SendCommand.self, OutboxCommand.self] as [any ParsableCommand.Type] {
            let help = StrataCommand.helpMessage(for: command)
            #expect(help.contains("Exit codes:"))
            for code in OutboxExitCode.allCases {
                #expect(help.contains("\n  \(code.rawValue) "), "help of \(command) documents exit code \(code.rawValue)")
            }
        }
    }

    @Test func aJSONBody_getsAJSONContentType_otherBodiesAnOctetStream() throws {
        let json = try #require(try StrataCommand.parseAsRoot(["send", "post", "http://example.com/x", "--data", #"{"a":1}"#]) as? SendCommand)
        #expect(try json.senderOptions(body: json.readBody()).headerFields[.contentType] == "application/json")
        #expect(try json.senderOptions(body: json.readBody()).method == .post)
        let text = try #require(try StrataCommand.parseAsRoot(["send", "PUT", "http://example.com/x", "--data", "plain"]) as? SendCommand)
        #expect(try text.senderOptions(body: text.readBody()).headerFields[.contentType] == "application/octet-stream")
        let given = try #require(try StrataCommand.parseAsRoot([
            "send", "PUT", "http://example.com/x", "--data", "a=1", "-H", "Content-Type: application/x-www-form-urlencoded",
        ]) as? SendCommand)
        #expect(try given.senderOptions(body: given.readBody()).headerFields[.contentType] == "application/x-www-form-urlencoded")
    }
}
