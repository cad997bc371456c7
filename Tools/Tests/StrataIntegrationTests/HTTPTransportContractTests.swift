import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import Strata
import StrataAsyncHTTPClient
import DemoServer

/// The transports under contract: Strata's default on URLSession and the opt-in on AsyncHTTPClient.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case urlSession = "URLSessionHTTPClient"
    case asyncHTTPClient = "AsyncHTTPTransport"

    var testDescription: String { rawValue }

    /// A transport of this kind of its own (a new session each time, the shared AsyncHTTPClient).
    func make(maxBodyBytes: Int? = URLSessionHTTPClient.defaultMaxBodyBytes) -> any HTTPTransport {
        switch self {
        case .urlSession: URLSessionHTTPClient(maxBodyBytes: maxBodyBytes)
        case .asyncHTTPClient: AsyncHTTPTransport(maxBodyBytes: maxBodyBytes)
        }
    }
}

/// The ``HTTPTransport`` contract, the same cases against both transports and the real in-process
/// server: what comes back, and which ``HTTPError`` each failure is.
@Suite("HTTP transport contract", .timeLimit(.minutes(3)))
struct HTTPTransportContractTests {
    static let bodyLimit = 1024 * 1024

    static func get(_ url: URL, fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: .get, url: url, headerFields: fields)
    }

    @Test(arguments: TransportKind.allCases)
    func get_returnsStatusFieldsAndBody(kind: TransportKind) async throws {
        try await withDemoServer { server in
            let reply = try await kind.make().send(Self.get(server.feedURL), body: nil, options: HTTPRequestOptions())
            #expect(reply.status == .ok)
            #expect(reply.headerFields[.contentType] == "application/json")
            #expect(reply.headerFields[.eTag] == server.feedValidators.etag)
            #expect(try JSONDecoder().decode([FeedItem].self, from: reply.body) == server.feed)
            #expect(reply.url == server.feedURL)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func requestFields_reachTheServer_andRepeatedResponseFieldsAreKept(kind: TransportKind) async throws {
        try await withDemoServer { server in
            let name = HTTPField.Name("X-Strata-Repeated")!
            var extra = HTTPFields()
            extra.append(HTTPField(name: name, value: "one"))
            extra.append(HTTPField(name: name, value: "two"))
            server.faults = .init(extraFields: extra)
            let reply = try await kind.make().send(
                Self.get(server.feedURL, fields: [.accept: "application/json"]), body: nil, options: HTTPRequestOptions())
            // AsyncHTTPClient keeps the two fields apart; Foundation folds them into one "one, two"
            // field: either way both values arrive, in order, under a case-insensitive name.
            let values = reply.headerFields[values: HTTPField.Name("x-strata-repeated")!]
                .flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            #expect(values == ["one", "two"])
            #expect(server.requests.first?.headers["Accept"] == "application/json")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func conditionalRequest_returnsThe304(kind: TransportKind) async throws {
        try await withDemoServer { server in
            let etag = try #require(server.feedValidators.etag)
            let reply = try await kind.make().send(
                Self.get(server.feedURL, fields: [.ifNoneMatch: etag]), body: nil, options: HTTPRequestOptions())
            #expect(reply.status == .notModified)
            #expect(reply.body.isEmpty)
            #expect(reply.headerFields[.eTag] == etag)
        }
    }

    @Test(arguments: TransportKind.allCases, [404, 500])
    func errorStatus_isReturnedByTheTransport_andIsHTTPErrorStatusFromTheLoader(kind: TransportKind, status: Int) async throws {
        try await withDemoServer { server in
            server.faults = .init(status: status, retryAfterSeconds: 7)
            let transport = kind.make()
            let reply = try await transport.send(Self.get(server.feedURL), body: nil, options: HTTPRequestOptions())
            #expect(reply.status.code == status)
            await #expect {
                try await HTTPLoader(url: server.feedURL, transport: transport).load()
            } throws: { error in
                guard case HTTPError.status(status, server.feedURL, let fields, let body) = error else { return false }
                return fields[.retryAfter] == "7" && String(decoding: body, as: UTF8.self).contains("injected fault")
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func connectionRefused_isATransportError(kind: TransportKind) async throws {
        try await withDemoServer { server in
            await server.goOffline()
            await #expect {
                try await kind.make().send(Self.get(server.feedURL), body: nil, options: HTTPRequestOptions(timeout: .seconds(10)))
            } throws: { error in
                // Refused, not "timed out": a transport that retried the refused connection until
                // its deadline (AsyncHTTPClient's default) would report the timeout.
                guard case HTTPError.transport(server.feedURL, let reason, _) = error else { return false }
                return reason == "could not connect (connection refused)"
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func noAnswerWithinTheTimeout_isATransportErrorThatSaysSo(kind: TransportKind) async throws {
        try await withDemoServer { server in
            server.faults = .init(holdRequests: true)
            defer { server.releaseHeldRequests() }
            // The transport's own timer: real time by nature, kept short.
            await #expect {
                try await kind.make().send(Self.get(server.feedURL), body: nil, options: HTTPRequestOptions(timeout: .seconds(1)))
            } throws: { error in
                guard case HTTPError.transport(server.feedURL, let reason, _) = error else { return false }
                return reason == "timed out"
            }
        }
    }

    /// The size of a body no client reads to the end: a terabyte, generated as it is sent. Refusing
    /// or cutting it must end the transfer: the server's own account says the connection went away.
    static let endlessBody = 1 << 40

    // Serialized, as the next test: each case streams an endless body until the client closes, and
    // many at once on two cores starved every other suite in the process.
    @Test(.serialized, .timeLimit(.minutes(1)), arguments: TransportKind.allCases, [true, false])
    func bodyOverTheLimit_isBodyTooLarge_andTheTransferEnds(kind: TransportKind, declaresLength: Bool) async throws {
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: Self.endlessBody, declaresOversizedLength: declaresLength)
            await #expect {
                try await kind.make().send(
                    Self.get(server.feedURL), body: nil, options: HTTPRequestOptions(maxBodyBytes: Self.bodyLimit))
            } throws: { error in
                guard case HTTPError.bodyTooLarge(server.feedURL, Self.bodyLimit, let received, let contentLength) = error else {
                    return false
                }
                return declaresLength
                    ? received == 0 && contentLength == Self.endlessBody
                    : received > Self.bodyLimit && received <= Self.bodyLimit + 1024 * 1024
            }
            // The refusal ended the transfer: the server saw the client close the connection (awaited,
            // not timed). A transport that left the body downloading, or left the connection open
            // with the server waiting to write, never gets here (the time limit fails it).
            let streamed = await server.waitForStreamedBodies(count: 1)
            #expect(streamed.count == 1 && streamed[0].closedByClient, "\(streamed)")
            #expect(streamed[0].bytes < Self.endlessBody)
        }
    }

    @Test(.serialized, .timeLimit(.minutes(1)), arguments: TransportKind.allCases, [true, false])
    func bodyOverTheLimit_withTruncate_returnsTheStatusAndTheBodyCutAtTheLimit_andTheTransferEnds(
        kind: TransportKind, declaresLength: Bool
    ) async throws {
        try await withDemoServer { server in
            server.faults = .init(status: 409, oversizedBody: Self.endlessBody, declaresOversizedLength: declaresLength)
            let reply = try await kind.make().send(
                Self.get(server.feedURL), body: nil,
                options: HTTPRequestOptions(maxBodyBytes: Self.bodyLimit, oversizedBody: .truncate))
            #expect(reply.status.code == 409)
            #expect(reply.headerFields[.contentType] == "text/plain; charset=utf-8")
            #expect(reply.isBodyTruncated)
            // Nothing of it when the Content-Length decided; otherwise exactly up to the limit.
            #expect(reply.body.count == (declaresLength ? 0 : Self.bodyLimit))
            let streamed = await server.waitForStreamedBodies(count: 1)
            #expect(streamed.count == 1 && streamed[0].closedByClient, "\(streamed)")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func bodyWithinTheLimit_withTruncate_isWhole(kind: TransportKind) async throws {
        try await withDemoServer { server in
            let reply = try await kind.make().send(
                Self.get(server.feedURL), body: nil, options: HTTPRequestOptions(maxBodyBytes: Self.bodyLimit, oversizedBody: .truncate))
            #expect(reply.status == .ok)
            #expect(!reply.isBodyTruncated)
            #expect(try JSONDecoder().decode([FeedItem].self, from: reply.body) == server.feed)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func theTransportsOwnLimit_appliesWhenTheRequestSetsNone(kind: TransportKind) async throws {
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: 4 * 1024 * 1024, declaresOversizedLength: false)
            await #expect {
                try await kind.make(maxBodyBytes: 256 * 1024).send(Self.get(server.feedURL), body: nil, options: HTTPRequestOptions())
            } throws: { error in
                if case HTTPError.bodyTooLarge(_, 262_144, _, _) = error { return true }
                return false
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func cancellingTheCaller_stopsTheRequest_withCancellationError(kind: TransportKind) async throws {
        try await withDemoServer { server in
            server.faults = .init(holdRequests: true)
            let transport = kind.make()
            let task = Task {
                try await transport.send(Self.get(server.feedURL), body: nil, options: HTTPRequestOptions(timeout: .seconds(60)))
            }
            await server.waitForRequests(count: 1)
            task.cancel()
            let result = await task.result
            server.releaseHeldRequests()
            #expect(throws: CancellationError.self) { try result.get() }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func postBody_reachesTheServer(kind: TransportKind) async throws {
        try await withDemoServer { server in
            let draft = Data(#"{"title":"t","body":"b"}"#.utf8)
            let request = HTTPRequest(
                method: .post, url: server.baseURL.appendingPathComponent("posts"), headerFields: [.contentType: "application/json"])
            let reply = try await kind.make().send(request, body: draft, options: HTTPRequestOptions())
            #expect(reply.status == .created)
            #expect(server.requests.first?.method == "POST")
        }
    }
}
