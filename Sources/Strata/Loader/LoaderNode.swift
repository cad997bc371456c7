/// One loader in a chain, as a tree: its label, the one-line summary used in errors and provenance,
/// and the loaders it wraps (outer → inner).
///
/// Every Strata operator describes itself this way, so `print(chain)` shows the order of decorators —
/// the most common confusion in resilience libraries:
/// ```
/// logged(strata.feed, info)
/// └── coalesced
///     └── fallingBack
///         ├── named "fresh local"
///         │   └── FileStore(/caches/feed) [max age 24h 0m]
///         ├── writingThrough(FileStore(/caches/feed))
///         │   └── retrying(3 attempts, 200ms ×2.0 ≤ 30s)
///         │       └── decoding Array<FeedItem>
///         │           └── HTTP GET https://example.com/feed
///         └── bundled default_feed.json
/// ```
public struct LoaderNode: Sendable, Hashable {
    /// What this loader is, in a few words (`retrying(3 attempts, …)`, `fallback`, `HTTP GET …`).
    public var label: String
    /// The one-line name used where a whole sub-chain must be named in a sentence: tier names in
    /// ``FallbackError``, ``Provenance/tier`` and ``LoadEvent``s.
    public var summary: String
    /// The loaders this one wraps or combines, outer → inner, in the order they are tried.
    public var children: [LoaderNode]
    /// Whether this node is a fallback whose children are tiers (nested fallbacks flatten into one).
    var isFallback = false
    /// Whether this loader reports loads as side effects (a log line, a metric, a span): an
    /// operator that can turn an immediate answer into `nil` holds their effects back.
    var observes = false

    /// Whether this loader or one inside it reports loads (``Loader/logged(to:level:failureLevel:)``,
    /// `metered`, `traced`, `tracked`).
    @usableFromInline var containsObserver: Bool {
        observes || children.contains { $0.containsObserver }
    }

    /// This node, marked as a loader that reports loads.
    func observing() -> LoaderNode {
        var node = self
        node.observes = true
        return node
    }

    /// A node for a loader that wraps or combines `children`. `summary` defaults to `label` for a
    /// leaf and to the first child's summary for a decorator.
    public init(label: String, summary: String? = nil, children: [LoaderNode] = []) {
        self.label = label
        self.summary = summary ?? (children.count == 1 ? children[0].summary : label)
        self.children = children
    }

    /// A loader that wraps nothing.
    public static func leaf(_ label: String) -> LoaderNode {
        LoaderNode(label: label)
    }

    /// The chain as an indented tree, outer loader first.
    public var tree: String {
        var lines = [label]
        appendChildren(to: &lines, prefix: "")
        return lines.joined(separator: "\n")
    }

    private func appendChildren(to lines: inout [String], prefix: String) {
        for (index, child) in children.enumerated() {
            let isLast = index == children.count - 1
            let childLabelLines = child.label.split(separator: "\n", omittingEmptySubsequences: false)
            lines.append(prefix + (isLast ? "└── " : "├── ") + (childLabelLines.first.map(String.init) ?? ""))
            let childPrefix = prefix + (isLast ? "    " : "│   ")
            for extra in childLabelLines.dropFirst() { lines.append(childPrefix + extra) }
            child.appendChildren(to: &lines, prefix: childPrefix)
        }
    }
}

/// A loader that describes itself as a ``LoaderNode``; its `description` is the tree.
///
/// Conform your own decorators so chains that use them still print as trees:
/// ```swift
/// extension AuditedLoader: LoaderDescribing {
///     public var loaderNode: LoaderNode { LoaderNode(label: "audited", children: [base.chainNode]) }
/// }
/// ```
public protocol LoaderDescribing: CustomStringConvertible {
    /// This loader and the loaders it wraps.
    var loaderNode: LoaderNode { get }
}

extension LoaderDescribing {
    /// The chain as a tree (see ``LoaderNode/tree``).
    public var description: String { loaderNode.tree }
}

extension Loader {
    /// The node describing this loader in a chain tree: its own when it is ``LoaderDescribing``;
    /// otherwise a leaf labelled with its `description`, or with its type name.
    public var chainNode: LoaderNode {
        if let describing = self as? any LoaderDescribing { return describing.loaderNode }
        if let described = self as? any CustomStringConvertible { return .leaf(described.description) }
        return .leaf(String(describing: type(of: self)))
    }

    /// The one-line name used for this loader in errors and provenance, `fresh local → remote`: its
    /// chain node's ``LoaderNode/summary``. Operators of your own use it to name their base as
    /// Strata's do.
    public var chainSummary: String { chainNode.summary }
}
