import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox
#if canImport(Network)
import Network
#endif
#if canImport(UIKit)
import UIKit
#elseif canImport(AppKit)
import AppKit
#endif

extension QueryClient {
    /// Follows `signal` (whether the network is reachable) until it ends or the calling task is
    /// cancelled: each element is `setOnline(_:)`. A signal that throws ends the following (logged).
    ///
    /// ```swift
    /// Task { await queries.follow(connectivity: QueryClient.systemConnectivity()) }   // Apple platforms
    /// Task { await queries.follow(connectivity: myReachability.updates) }             // any AsyncSequence<Bool>
    /// ```
    public func follow<Signal: AsyncSequence & Sendable>(connectivity signal: Signal) async where Signal.Element == Bool {
        do {
            for try await online in signal { setOnline(online) }
        } catch {
            environment.logger.warning("live queries stopped following their connectivity signal", metadata: ["error": "\(error)"])
        }
    }

    /// Follows `signal` (the app came to the foreground) until it ends or the calling task is
    /// cancelled: each element is `enteredForeground()`.
    public func follow<Signal: AsyncSequence & Sendable>(foreground signal: Signal) async {
        do {
            for try await _ in signal { enteredForeground() }
        } catch {
            environment.logger.warning("live queries stopped following their foreground signal", metadata: ["error": "\(error)"])
        }
    }
}

#if canImport(Network)
extension QueryClient {
    /// The system's reachability as a sequence of `Bool` (an `NWPathMonitor`: `true` when the path
    /// is satisfied), each change once; for `follow(connectivity:)`. The monitor stops when the
    /// sequence's iteration ends.
    @available(macOS 10.14, iOS 12, tvOS 12, watchOS 5, *)
    public static func systemConnectivity() -> AsyncStream<Bool> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let monitor = NWPathMonitor()
            let last = Locked<Bool?>(nil)
            monitor.pathUpdateHandler = { path in
                let online = path.status == .satisfied
                let changed = last.withLock { last in
                    defer { last = online }
                    return last != online
                }
                if changed { continuation.yield(online) }
            }
            continuation.onTermination = { _ in monitor.cancel() }
            monitor.start(queue: DispatchQueue(label: "strata.queries.connectivity"))
        }
    }
}
#endif

#if (canImport(UIKit) && !os(watchOS)) || canImport(AppKit)
extension QueryClient {
    /// The app coming to the foreground, for `follow(foreground:)`:
    /// `UIApplication.willEnterForegroundNotification` with UIKit,
    /// `NSApplication.didBecomeActiveNotification` with AppKit.
    @MainActor
    public static func systemForeground() -> AsyncStream<Void> {
        #if canImport(UIKit)
        let name = UIApplication.willEnterForegroundNotification
        #else
        let name = NSApplication.didBecomeActiveNotification
        #endif
        return AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let observer = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { _ in continuation.yield() }
            let token = UncheckedObserver(observer)
            continuation.onTermination = { _ in NotificationCenter.default.removeObserver(token.observer) }
        }
    }
}

/// A notification observer token, carried to the stream's termination handler.
///
/// `@unchecked Sendable`: the token is an opaque object NotificationCenter hands back; it is never
/// read or mutated here, only passed back to `removeObserver(_:)`, which is thread-safe.
private struct UncheckedObserver: @unchecked Sendable {
    let observer: any NSObjectProtocol
    init(_ observer: any NSObjectProtocol) { self.observer = observer }
}
#endif
