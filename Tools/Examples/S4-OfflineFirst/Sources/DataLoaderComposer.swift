import Foundation
import Strata

/// The composition root of S4 OfflineFirst: requirements 1–7 in one fluent expression. The only place
/// the chain is built: the example's tests, the `offline-first` demo scenario and the integration
/// tests all run this one.
///
/// ```
/// local24h.fallingBack(to: remote.cache(in: store)).fallingBack(to: localAny).fallingBack(to: defaultLoader)
/// ```
/// 1–2: `remote.cache(in:)` fetches the latest data and saves it. 3–4: `local24h` checks the
/// validity period and answers first, without the network. 5: when it has expired the chain moves on
/// to the remote. 6: when the remote fails too, `localAny` serves the stale copy. 7: on a first
/// launch with no network and no local data, the bundled default.
///
/// The tiers are named `fresh local`, `remote`, `stale local` and `bundled default`: the names
/// `loadServed()` reports as the tier that served, and a `FallbackError` lists.
public enum DataLoaderComposer {
    /// The chain over data of any shape: whatever the server answers with a 2xx is saved.
    public static func makeDataLoader(
        serverURL: URL, store: LocalDataStore,
        defaultLoader: DefaultLoader = DefaultLoader(),
        client: any HTTPTransport = URLSessionHTTPClient.shared
    ) -> some DataLoader {
        makeDataLoader(remote: RemoteLoader(url: serverURL, client: client), store: store, defaultLoader: defaultLoader)
    }

    /// The chain over data that must decode as `payload`: an answer that does not (truncated, the
    /// wrong shape) is the remote tier's failure, `HTTPError.decoding` naming the URL, so it is never
    /// saved and the stale copy is served instead.
    public static func makeDataLoader<Payload: Decodable & Sendable>(
        serverURL: URL, expecting payload: Payload.Type, store: LocalDataStore,
        defaultLoader: DefaultLoader = DefaultLoader(),
        client: any HTTPTransport = URLSessionHTTPClient.shared
    ) -> some DataLoader {
        makeDataLoader(
            remote: RemoteLoader(url: serverURL, expecting: payload, client: client), store: store,
            defaultLoader: defaultLoader)
    }

    static func makeDataLoader(remote: RemoteLoader, store: LocalDataStore, defaultLoader: DefaultLoader) -> some DataLoader {
        let local24h = LocalLoader(store: store, cachePolicy: TwentyFourHoursPolicy()).named("fresh local")
        let localAny = LocalLoader(store: store, cachePolicy: NullPolicy()).named("stale local")

        return local24h
            .fallingBack(to: remote.cache(in: store).named("remote"))
            .fallingBack(to: localAny)
            .fallingBack(to: defaultLoader.named("bundled default"))
    }
}
