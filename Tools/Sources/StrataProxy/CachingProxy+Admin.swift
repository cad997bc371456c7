import Foundation
import Strata

/// `/_strata/`: the fleet's controls and figures, on the node's control listener (never the
/// public one, whose `/_strata/…` paths go to the upstream like any other).
///
/// - `POST /_strata/invalidate?tag=T` or `?prefix=/path` (`&mode=expire|remove`, default
///   `expire`): acts on every node (the shared tier changes on the server, and every node's
///   memory tier hears it through the backplane).
/// - `POST /_strata/clear?mode=expire|remove`: every stored response of this cache (its table).
/// - `GET /_strata/metrics`: the counters, in Prometheus' text format.
/// - `GET /_strata/health`: `200` with the node's name.
///
/// Who may: every action that changes something needs `Authorization: Bearer <admin token>`
/// (compared in constant time), and is refused when the node has no token; reads need it too when
/// the control listener is not on loopback (health excepted). A request a browser sends for
/// another site (`Sec-Fetch-Site: cross-site` or `same-site`, or an `Origin` other than the
/// listener's own) is refused before anything else: a web page cannot clear the fleet.
extension CachingProxy {
    func admin(_ request: Request, path: String) async -> Answer {
        metrics.count { $0.requests["admin", default: 0] += 1 }
        let components = URLComponents(string: path)
        let route = components?.path ?? path
        let query = Dictionary(
            (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
        if let refusal = Self.crossSiteRefusal(request.head) {
            return text(.forbidden, "strata proxy: \(refusal)\n")
        }
        if route == "/_strata/health", request.head.method == .get {
            return text(.ok, "ok \(settings.node)\n")
        }
        let mutating = request.head.method != .get && request.head.method != .head
        // A read without the token is a loopback client's: its Host must name loopback too, so a
        // web page whose name was rebound to 127.0.0.1 cannot read the figures.
        let tokenless = !mutating && settings.adminIsLoopback && Self.namesLoopback(request.head.authority)
        if !tokenless {
            guard let token = settings.adminToken else {
                return text(.forbidden, "strata proxy: this node has no --admin-token, so its controls change nothing\n")
            }
            guard Self.bearer(request.head.headerFields[.authorization], matches: token) else {
                return text(.unauthorized, "strata proxy: /_strata/ needs Authorization: Bearer <the admin token>\n")
            }
        }
        switch (request.head.method, route) {
        case (.get, "/_strata/metrics"):
            let figures = cache.backplaneStatistics
            let backplane = TieredStoreBackplaneFigures(
                events: figures.events, ownIgnored: figures.ownChangesIgnored, copiesDropped: figures.copiesDropped,
                invalidations: figures.invalidations, listeningStarts: figures.listeningStarts,
                unsentWrites: cache.unsentWrites, sharedTierDown: cache.sharedTierIsDown,
                memoryEntries: cache.memory.count, memoryBytes: cache.memory.totalCost)
            return Answer(
                status: .ok, fields: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                body: Data(metrics.exposition(node: settings.node, backplane: backplane).utf8))
        case (.post, "/_strata/invalidate"):
            let selection: CacheSelection
            let cause: String
            if let tag = query["tag"], !tag.isEmpty {
                selection = .tag(tag)
                cause = "tag"
            } else if let prefix = query["prefix"], prefix.hasPrefix("/") {
                selection = .keyPrefix(Self.key(path: prefix))
                cause = "prefix"
            } else {
                return text(.badRequest, "strata proxy: invalidate needs ?tag=T or ?prefix=/path (and &mode=expire|remove)\n")
            }
            return await invalidate(selection, mode: query["mode"], cause: cause)
        case (.post, "/_strata/clear"):
            return await invalidate(.all, mode: query["mode"], cause: "clear")
        default:
            return text(.notFound, "strata proxy: unknown control \(request.head.method) \(route)\n")
        }
    }

    /// Why a request a browser sent for another site is refused, or `nil`: `Sec-Fetch-Site`
    /// other than `same-origin` or `none`, or an `Origin` whose host is not the one the request
    /// was sent to.
    static func crossSiteRefusal(_ head: HTTPRequest) -> String? {
        if let site = head.headerFields[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased(), site != "same-origin", site != "none" {
            return "cross-site requests to the controls are refused (Sec-Fetch-Site: \(site))"
        }
        if let origin = head.headerFields[HTTPField.Name("Origin")!] {
            let originHost = URLComponents(string: origin).flatMap { components in
                components.host.map { host in components.port.map { "\(host):\($0)" } ?? host }
            }
            guard let originHost, let authority = head.authority, originHost == authority else {
                return "cross-origin requests to the controls are refused (Origin: \(origin))"
            }
        }
        return nil
    }

    /// Whether `authority` (a request's `Host`) is a loopback address or `localhost`, with any port.
    static func namesLoopback(_ authority: String?) -> Bool {
        guard let authority else { return false }
        var host = Substring(authority)
        if host.hasPrefix("[") {
            host = host.dropFirst().prefix(while: { $0 != "]" })
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { part in UInt8(part) != nil }
    }

    /// Whether `authorization` is `Bearer <token>`, compared in constant time (for a given length
    /// of the token).
    static func bearer(_ authorization: String?, matches token: String) -> Bool {
        let given = Array((authorization ?? "").utf8)
        let expected = Array("Bearer \(token)".utf8)
        var difference = given.count ^ expected.count
        for index in expected.indices {
            difference |= Int(expected[index] ^ (index < given.count ? given[index] : ~expected[index]))
        }
        return difference == 0
    }

    private func invalidate(_ selection: CacheSelection, mode: String?, cause: String) async -> Answer {
        guard let mode = InvalidationMode(rawValue: mode ?? "expire") else {
            return text(.badRequest, "strata proxy: mode is expire or remove\n")
        }
        do {
            let count = try await cache.invalidate(selection, as: mode)
            metrics.count {
                $0.invalidations[cause, default: 0] += 1
                $0.notificationsSent += 1
            }
            logger.info("invalidated", metadata: ["selection": "\(selection)", "mode": "\(mode)", "entries": "\(count)"])
            let body = #"{"invalidated":\#(count),"mode":"\#(mode.rawValue)","node":"\#(settings.node)"}"# + "\n"
            return Answer(status: .ok, fields: [.contentType: "application/json", .cacheControl: "no-store"], body: Data(body.utf8))
        } catch {
            return text(.serviceUnavailable, "strata proxy: the shared cache could not be invalidated: \(error)\n")
        }
    }

    private func text(_ status: HTTPResponse.Status, _ body: String) -> Answer {
        Answer(status: status, fields: [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store", .xStrataNode: settings.node],
               body: Data(body.utf8))
    }
}
