import Foundation
import Hummingbird
import ServiceLifecycle
import StrataInspector

extension FeedWebDemo {
    /// The page at `/`, its API under `/api` and the inspector at `/inspector`.
    ///
    /// Every route answers only whom the inspector answers (its peers and host names: loopback by
    /// default; `403` otherwise), and every route but the page needs the inspector's token:
    ///
    /// - `GET /api/feed`: the ``FeedView`` now; `GET /api/events`: server-sent events, one `feed`
    ///   event carrying the ``FeedView`` at once and after every change (the token in
    ///   `X-Strata-Token`, or for the events in the `token` query parameter).
    /// - `POST /api/network?online=true|false`, `POST /api/clock?advance=SECONDS`,
    ///   `POST /api/posts` (`{"title": …}`: the posting mutation, started), `POST /api/next-page`,
    ///   `POST /api/previous-page`, `POST /api/refresh`, `POST /api/write-fault?status=422|none`
    ///   (the server refuses posts, or not): the controls, each with the token in `X-Strata-Token`
    ///   (403 without it).
    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        router.get("/") { request, context in
            try self.inspector.checkAccess(request, context: context)
            return self.inspector.page(template: FeedPage.html)
        }
        let api = router.group("api")
        api.get("feed") { request, context in
            try self.inspector.authorize(request, context: context)
            return try Self.json(self.view())
        }
        api.get("events") { request, context in
            try self.inspector.authorizeEventStream(request, context: context)
            return self.events()
        }
        api.post("network") { request, context in
            try self.inspector.authorize(request, context: context)
            switch request.uri.queryParameters.get("online") {
            case "true": try await self.goOnline()
            case "false": await self.goOffline()
            default: throw HTTPError(.badRequest, message: "online=true or online=false")
            }
            return Response(status: .noContent)
        }
        api.post("clock") { request, context in
            try self.inspector.authorize(request, context: context)
            guard let seconds = request.uri.queryParameters.get("advance", as: Int.self), (1...(366 * 86_400)).contains(seconds) else {
                throw HTTPError(.badRequest, message: "advance=SECONDS, from 1 to a year")
            }
            self.advanceClock(by: .seconds(seconds))
            return Response(status: .noContent)
        }
        api.post("posts") { request, context in
            try self.inspector.authorize(request, context: context)
            let draft = try await request.decode(as: PostForm.self, context: context)
            let title = draft.title.trimmingCharacters(in: .whitespacesAndNewlines)
            guard (1...200).contains(title.count) else { throw HTTPError(.badRequest, message: "a title of 1 to 200 characters") }
            guard self.startPost(title: title) else { throw HTTPError(.serviceUnavailable, message: "the demo has stopped") }
            return Response(status: .accepted)
        }
        api.post("next-page") { request, context in
            try self.inspector.authorize(request, context: context)
            self.feed.fetchNextPage()
            return Response(status: .noContent)
        }
        api.post("previous-page") { request, context in
            try self.inspector.authorize(request, context: context)
            self.feed.fetchPreviousPage()
            return Response(status: .noContent)
        }
        api.post("write-fault") { request, context in
            try self.inspector.authorize(request, context: context)
            switch request.uri.queryParameters.get("status") {
            case "422": self.setRefusingPosts(true)
            case "none": self.setRefusingPosts(false)
            default: throw HTTPError(.badRequest, message: "status=422 or status=none")
            }
            return Response(status: .noContent)
        }
        api.post("refresh") { request, context in
            try self.inspector.authorize(request, context: context)
            self.feed.refetch()
            return Response(status: .noContent)
        }
        inspector.addRoutes(to: router)
    }

    /// Serves the demo on `host` (loopback by default) and `port` (0: any free port) while `body`
    /// runs, given the port it listens on.
    public func serving<Result: Sendable>(
        host: String = "127.0.0.1", port: Int = 0, _ body: (Int) async throws -> Result
    ) async throws -> Result {
        try await StrataInspector.serving(host: host, port: port, serverName: "strata-web-demo", routes: addRoutes, body)
    }

    struct PostForm: Decodable {
        var title: String
    }

    private static func json(_ value: some Encodable) throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store", .xContentTypeOptions: "nosniff"],
            body: .init(byteBuffer: ByteBuffer(bytes: try encode(value))))
    }

    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(value)
    }

    /// `event: feed` with the view, at once and after every change that shows (merged when changes
    /// come faster than the page reads them), until the server shuts down gracefully.
    private func events() -> Response {
        let body = ResponseBody { writer in
            // Subscribed when the body runs: a client gone before then leaves no subscription.
            let changes = self.viewChanges()
            try await writer.write(ByteBuffer(string: "retry: 1000\n"))
            var last: FeedView?
            try await writer.write(ByteBuffer(string: try self.event(self.view(), last: &last)))
            for await _ in changes.cancelOnGracefulShutdown() {
                let view = self.view()
                guard view != last else { continue }
                try await writer.write(ByteBuffer(string: try self.event(view, last: &last)))
            }
            try await writer.finish(nil)
        }
        return Response(
            status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store", .xContentTypeOptions: "nosniff"], body: body)
    }

    private func event(_ view: FeedView, last: inout FeedView?) throws -> String {
        last = view
        return "event: feed\ndata: \(String(decoding: try Self.encode(view), as: UTF8.self))\n\n"
    }
}
