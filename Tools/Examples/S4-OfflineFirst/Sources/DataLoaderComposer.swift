import Foundation
import Strata

/// The composition root of S4: requirements 1–7 in one fluent expression.
///
/// ```
/// local24h.fallingBack(to: remote.cache(in: store)).fallingBack(to: localAny).fallingBack(to: defaultLoader)
/// ```
/// 1–2: `remote.cache(in:)` fetches the latest data and saves it. 3–4: `local24h` checks the
/// validity period and answers first, without the network. 5: when it has expired the chain moves on
/// to the remote. 6: when the remote fails too, `localAny` serves the stale copy. 7: on a first
/// launch with no network and no local data, the bundled default.
public enum DataLoaderComposer {
    public static func makeDataLoader(
        serverURL: URL, store: LocalDataStore,
        defaultLoader: DefaultLoader = DefaultLoader(),
        client: any HTTPTransport = URLSessionHTTPClient.shared
    ) -> some DataLoader {
        let local24h = LocalLoader(store: store, cachePolicy: TwentyFourHoursPolicy()).named("local (24 h)")
        let remote = RemoteLoader(url: serverURL, client: client)
        let localAny = LocalLoader(store: store, cachePolicy: NullPolicy()).named("local (any age)")

        return local24h
            .fallingBack(to: remote.cache(in: store).named("remote"))
            .fallingBack(to: localAny)
            .fallingBack(to: defaultLoader.named("default"))
    }
}
