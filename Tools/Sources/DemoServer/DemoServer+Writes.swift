import Foundation
import Hummingbird
import Logging
@_spi(StrataInternals) import Strata

extension DemoServer {
    // MARK: What the server did with writes

    /// Whether writes honour `Idempotency-Key` (the default). Off, a repeated key is applied again
    /// each time (still counted in ``idempotencyKeys``): the server of a test that must see a
    /// duplicate to show it can fail.
    public var honoursIdempotencyKeys: Bool {
        get { state.withLock { $0.honoursIdempotencyKeys } }
        set { state.withLock { $0.honoursIdempotencyKeys = newValue } }
    }

    /// Every `Idempotency-Key` the server has seen, in the order first seen, with how often each was
    /// sent, applied, answered again from the record, and refused.
    public var idempotencyKeys: [IdempotencyKeyRecord] { state.withLock { $0.idempotency.allRecords } }

    /// What the server knows of `key`, or `nil` when no request carried it.
    public func idempotencyKey(_ key: String) -> IdempotencyKeyRecord? {
        state.withLock { $0.idempotency.record(for: key) }
    }

    /// Every write the server applied, in order (with or without a key).
    public var appliedWrites: [AppliedWrite] { state.withLock { $0.appliedWrites } }

    /// Calls `observer` for every write request the server handles (applied, answered again,
    /// refused, faulted, rejected), after it decided and before it answers. `strata serve` prints them.
    public func onWrite(_ observer: @escaping @Sendable (WriteEvent) -> Void) {
        state.withLock { $0.writeObservers.append(observer) }
    }

    // MARK: Routes

    /// The largest write body the server reads (the crash loop's writes are up to ~270 KB of JSON).
    static let maxWriteBody = 16 * 1024 * 1024

    static let idempotencyKeyField = HTTPField.Name("Idempotency-Key")!
    static let replayedField = HTTPField.Name("Idempotent-Replayed")!

    /// `POST /posts`, `PUT /posts/{id}` (replace), `PATCH /posts/{id}` (change `title` and/or
    /// `body`), `DELETE /posts/{id}`. The last three honour `If-Match`.
    func addWriteRoutes(to router: Router<DemoRequestContext>) {
        router.post("posts") { [self] request, context -> Response in
            try await write(request, context: context) { state, body, _ in
                let draft = try Self.decodeWrite(NewPost.self, from: body)
                let post = Post(id: state.nextPostID, title: draft.title, body: draft.body)
                state.posts[post.id] = post
                state.nextPostID += 1
                return try Self.postAnswer(post, status: .created, location: true)
            }
        }
        router.put("posts/:id") { [self] request, context -> Response in
            let id = try context.parameters.require("id", as: Int.self)
            return try await write(request, context: context) { state, body, headers in
                let current = try Self.existingPost(id, in: state, matching: headers)
                let draft = try Self.decodeWrite(NewPost.self, from: body)
                let post = Post(id: current.id, title: draft.title, body: draft.body)
                state.posts[id] = post
                return try Self.postAnswer(post, status: .ok)
            }
        }
        router.patch("posts/:id") { [self] request, context -> Response in
            let id = try context.parameters.require("id", as: Int.self)
            return try await write(request, context: context) { state, body, headers in
                var post = try Self.existingPost(id, in: state, matching: headers)
                let patch = try Self.decodeWrite(PostPatch.self, from: body)
                post.title = patch.title ?? post.title
                post.body = patch.body ?? post.body
                state.posts[id] = post
                return try Self.postAnswer(post, status: .ok)
            }
        }
        router.delete("posts/:id") { [self] request, context -> Response in
            let id = try context.parameters.require("id", as: Int.self)
            return try await write(request, context: context) { state, _, headers in
                _ = try Self.existingPost(id, in: state, matching: headers)
                state.posts[id] = nil
                return IdempotencyLedger.Answer(status: 204, headers: [:], body: Data())
            }
        }
    }

    /// The body of `PATCH /posts/{id}`: the fields to change.
    struct PostPatch: Decodable {
        var title: String?
        var body: String?
    }

    /// Why a write was not applied: answered with `status` and a problem body, nothing recorded.
    struct WriteRejection: Error {
        var status: Int
        var title: String
        var detail: String
        var etag: String?
    }

    static func decodeWrite<Value: Decodable>(_ type: Value.Type, from body: Data) throws -> Value {
        do {
            return try JSONDecoder().decode(Value.self, from: body)
        } catch {
            throw WriteRejection(status: 400, title: "Bad Request", detail: "the body is not a \(Value.self) as JSON: \(error)")
        }
    }

    /// The post `id`, when it exists and the request's `If-Match` (if any) matches its `ETag`.
    static func existingPost(_ id: Int, in state: State, matching headers: HTTPFields) throws -> Post {
        guard let post = state.posts[id] else {
            throw WriteRejection(status: 404, title: "Not Found", detail: "there is no post \(id)")
        }
        let etag = strongETag(of: (try? encodeJSON(post)) ?? Data())
        let ifMatch = headers[values: .ifMatch].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        // RFC 9110 §13.1.1: strong comparison; `*` matches any current representation.
        if !ifMatch.isEmpty, !ifMatch.contains("*"), !ifMatch.contains(etag) {
            throw WriteRejection(
                status: 412, title: "Precondition Failed",
                detail: "If-Match \(ifMatch.joined(separator: ", ")) does not match the post's current version \(etag)", etag: etag)
        }
        return post
    }

    static func postAnswer(_ post: Post, status: HTTPResponse.Status, location: Bool = false) throws -> IdempotencyLedger.Answer {
        let data = try encodeJSON(post)
        var headers: HTTPFields = [.contentType: "application/json", .eTag: strongETag(of: data)]
        if location { headers[.location] = "/posts/\(post.id)" }
        return IdempotencyLedger.Answer(status: status.code, headers: headers, body: data)
    }

    /// The current `ETag` of what a write to `path` changes: the post for `/posts/{id}`, the whole
    /// collection for `/posts`; `nil` for a post that does not exist.
    static func currentETag(of path: String, in state: State) -> String? {
        let parts = path.split(separator: "/")
        if parts.count == 2, let id = Int(parts[1]) {
            return state.posts[id].flatMap { try? encodeJSON($0) }.map(strongETag(of:))
        }
        let all = state.posts.keys.sorted().compactMap { state.posts[$0] }
        return (try? encodeJSON(all)).map(strongETag(of:))
    }

    // MARK: Handling one write

    /// Handles one write: faults, then `Idempotency-Key` (replay, 409 in flight, 422 reused), then
    /// `apply` (under the server's lock, so a write and its record are one step), then the answer —
    /// or, for ``WriteFault/dropAfterApply``, a dropped connection.
    func write(
        _ request: Request, context: DemoRequestContext,
        apply: (inout State, Data, HTTPFields) throws -> IdempotencyLedger.Answer
    ) async throws -> Response {
        var request = request
        let body = Data(try await request.collectBody(upTo: Self.maxWriteBody).readableBytesView)
        let method = request.method.rawValue
        let path = request.uri.path
        var key: String?
        if let field = request.headers[Self.idempotencyKeyField] {
            guard let parsed = IdempotencyLedger.key(fromField: field) else {
                _ = admit(request, isWrite: true)
                notify(WriteEvent(method: method, path: path, idempotencyKey: nil, outcome: .rejected(status: 400), connectionDropped: false))
                return Self.problem(
                    400, type: "idempotency-key-invalid", title: "Bad Request",
                    detail: "Idempotency-Key must be a string of 1 to 255 visible ASCII characters (a structured-field string)")
            }
            key = parsed
        }
        let fingerprint = IdempotencyLedger.fingerprint(method: method, path: path, body: body)
        // The request is recorded and its key admitted in one step: a test that waits for the
        // request sees the key in flight.
        let (admitted, (admission, reserved)) = admit(request, isWrite: true) { state, admitted -> (IdempotencyLedger.Admission, Bool) in
            guard let key else { return (.apply, false) }
            state.idempotency.noteRequest(key, method: method, path: path)
            let faulted = admitted.failThisRequest || (admitted.writeFault.map { $0 != .dropAfterApply } ?? false)
            guard !faulted, state.honoursIdempotencyKeys else { return (.apply, false) }
            return (state.idempotency.admit(key, fingerprint: fingerprint), true)
        }
        let dropping = admitted.writeFault == .dropAfterApply
        if let key { logger.info("idempotency key seen", metadata: ["key": "\(key)", "method": "\(method)", "path": "\(path)"]) }
        let event = { (outcome: WriteEvent.Outcome, dropped: Bool) in
            WriteEvent(method: method, path: path, idempotencyKey: key, outcome: outcome, connectionDropped: dropped)
        }
        switch admission {
        case .replay(let recorded):
            notify(event(.replayed(status: recorded.status), dropping))
            if dropping { return await drop(context) }
            var headers = recorded.headers
            headers[Self.replayedField] = "true"
            return answer(request, status: .init(code: recorded.status), headers: headers, data: recorded.body, faults: admitted.faults)
        case .inFlight:
            notify(event(.keyInFlight, false))
            return Self.problem(
                409, type: "idempotency-key-in-flight", title: "Conflict",
                detail: "a request with Idempotency-Key \(key ?? "") is still being processed; retry once it has been answered",
                headers: [.retryAfter: "1"])
        case .reused:
            notify(event(.keyReused, false))
            return Self.problem(
                422, type: "idempotency-key-reused", title: "Unprocessable Content",
                detail: "Idempotency-Key \(key ?? "") was used for a different request (method, path or body)")
        case .apply:
            break
        }

        do {
            try await waitAsFaultsAsk(admitted)
        } catch {
            if reserved, let key { state.withLock { $0.idempotency.release(key) } }
            throw error
        }
        if admitted.failThisRequest, let status = admitted.faults.status {
            notify(event(.faulted(status: status), false))
            return oversizingBody(of: Self.faultResponse(status: status, faults: admitted.faults, request: request), admitted.faults)
        }
        if let fault = admitted.writeFault, let status = fault.status {
            let etag = state.withLock { Self.currentETag(of: path, in: $0) }
            notify(event(.faulted(status: status), false))
            return oversizingBody(of: Self.writeFaultResponse(fault, etag: etag), admitted.faults)
        }

        let applied = state.withLock { state -> Result<IdempotencyLedger.Answer, WriteRejection> in
            do {
                let answer = try apply(&state, body, request.headers)
                if let key { state.idempotency.complete(key, fingerprint: fingerprint, answer: answer, honoured: reserved) }
                state.appliedWrites.append(AppliedWrite(method: method, path: path, idempotencyKey: key, status: answer.status))
                return .success(answer)
            } catch {
                if reserved, let key { state.idempotency.release(key) }
                return .failure(error as? WriteRejection ?? WriteRejection(status: 500, title: "Internal Server Error", detail: "\(error)"))
            }
        }
        switch applied {
        case .success(let done):
            notify(event(.applied(status: done.status), dropping))
            if dropping { return await drop(context) }
            return answer(request, status: .init(code: done.status), headers: done.headers, data: done.body, faults: admitted.faults)
        case .failure(let rejection):
            notify(event(.rejected(status: rejection.status), false))
            var headers = HTTPFields()
            if let etag = rejection.etag { headers[.eTag] = etag }
            return oversizingBody(
                of: Self.problem(rejection.status, type: nil, title: rejection.title, detail: rejection.detail, headers: headers),
                admitted.faults)
        }
    }

    /// Drops the request's connection; the response returned is never sent (the connection is gone).
    private func drop(_ context: DemoRequestContext) async -> Response {
        await context.dropConnection()
        return Response(status: .internalServerError)
    }

    private func notify(_ event: WriteEvent) {
        let observers = state.withLock { $0.writeObservers }
        for observer in observers { observer(event) }
    }

    static func writeFaultResponse(_ fault: WriteFault, etag: String?) -> Response {
        switch fault {
        case .status(let code, let retryAfter):
            var headers: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
            if let retryAfter { headers[.retryAfter] = "\(retryAfter)" }
            return Response(
                status: .init(code: code), headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: "injected write fault: \(code), the write was not applied\n")))
        case .conflict:
            var headers = HTTPFields()
            if let etag { headers[.eTag] = etag }
            return problem(
                409, type: "conflict", title: "Conflict",
                detail: "injected write fault: the resource changed meanwhile" + (etag.map { "; its current version is \($0)" } ?? ""),
                headers: headers)
        case .unprocessable:
            return problem(422, type: "validation-failed", title: "Unprocessable Content", detail: "injected write fault: the write was rejected as invalid")
        case .dropAfterApply:
            preconditionFailure("drop-after-apply answers nothing")
        }
    }

    /// An RFC 9457 problem (`application/problem+json`): `type` (under the demo's problem base),
    /// `title`, `status`, `detail`.
    static func problem(_ status: Int, type: String?, title: String, detail: String, headers: HTTPFields = [:]) -> Response {
        struct Problem: Encodable {
            var type: String
            var title: String
            var status: Int
            var detail: String
        }
        let problem = Problem(
            type: type.map { "https://strata.example/problems/\($0)" } ?? "about:blank", title: title, status: status, detail: detail)
        var fields = headers
        fields[.contentType] = "application/problem+json"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(problem)) ?? Data()
        return Response(status: .init(code: status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
