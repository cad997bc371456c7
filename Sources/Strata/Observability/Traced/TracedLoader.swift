import Tracing

/// Wraps each load of its base loader in a swift-distributed-tracing span; built by
/// ``Loader/traced(_:tracer:)``.
///
/// The span (kind `internal`) is a child of the caller's current span, and inner spans (an
/// instrumented HTTP client, a traced tier) nest under it. It carries:
/// - `strata.loader` — the chain's name for the loader;
/// - `strata.origin`, `strata.tier`, `strata.age_ms` — where the value came from (when served);
/// - `strata.retries` — retries inside; `strata.outcome` — served, failed or cancelled;
/// - one span event per ``LoadEvent``, named by its ``LoadEvent/kind``, with its description
///   (secrets redacted);
/// - the error and an error status when the load fails.
public struct TracedLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    /// The span's operation name.
    public let operationName: String
    let tracer: any Tracer
    /// The chain's summary and its redacted form, made once when the operator is built.
    let name: String
    let redactedName: String
    /// The tracer is the no-op tracer (what `InstrumentationSystem.tracer` is when no tracing backend
    /// was bootstrapped): its spans record nothing and carry the context they were given, so a load
    /// is a plain call to the base.
    @usableFromInline let isNoOp: Bool

    init(base: Base, operationName: String, tracer: any Tracer) {
        self.base = base
        self.operationName = operationName
        self.tracer = tracer
        self.name = base.chainSummary
        self.redactedName = Redaction.redactingSecrets(in: name)
        self.isNoOp = tracer is NoOpTracer
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        if isNoOp { return try await base.load(input, in: context) }
        return try await traceLoad(input, in: context)
    }

    /// The base's immediate answer, wrapped in a span that starts when the attempt started: the
    /// span is made only once there is a value, so an attempt that answers `nil` leaves no span
    /// behind (the load that follows makes its own). Spans the chain makes inside an immediate
    /// answer are therefore siblings of this one, not its children.
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        if isNoOp { return base.loadImmediately(input, in: context) }
        return traceImmediately(input, in: context)
    }

    @usableFromInline
    func traceImmediately(_ input: Input, in context: LoadContext) -> Output? {
        let start = DefaultTracerClock.now
        guard let (value, report) = observeImmediately(base, input, in: context, loader: name) else { return nil }
        let parent = InstrumentationContext.current ?? .topLevel
        context.afterImmediateAnswer { [tracer, operationName, redactedName] in
            let span = tracer.startSpan(operationName, context: parent, ofKind: .internal, at: start)
            defer { span.end() }
            guard span.isRecording else { return }
            span.attributes["strata.loader"] = redactedName
            for event in report.events { Self.addEvent(event, to: span) }
            Self.annotate(span, with: report)
        }
        return value
    }

    @usableFromInline
    func traceLoad(_ input: Input, in context: LoadContext) async throws -> Output {
        try await traceLoad(input, tracer: tracer, in: context)
    }

    private func traceLoad<T: Tracer>(_ input: Input, tracer: T, in context: LoadContext) async throws -> Output {
        let span = tracer.startSpan(operationName, context: InstrumentationContext.current ?? .topLevel, ofKind: .internal)
        defer { span.end() }
        // A span nobody records (the no-op tracer, a sampled-out trace) gets no attributes or events:
        // building them (redaction included) would be thrown away.
        guard span.isRecording else {
            return try await InstrumentationContext.$current.binding(span.context) { try await base.load(input, in: context) }
        }
        span.attributes["strata.loader"] = redactedName
        let (result, report) = await InstrumentationContext.$current.binding(span.context) {
            await observeLoad(base, input, in: context, loader: name, clock: ContinuousClock()) { event, _ in
                Self.addEvent(event, to: span)
            }
        }
        Self.annotate(span, with: report)
        return try result.get()
    }

    /// Adds `event` to `span`, its description redacted.
    static func addEvent(_ event: LoadEvent, to span: some Span) {
        span.addEvent(SpanEvent(name: event.kind, attributes: ["strata.event": .string(Redaction.redactingSecrets(in: event.description))]))
    }

    /// Sets the attributes and status of the span of the load `report` describes.
    static func annotate(_ span: some Span, with report: LoadReport) {
        span.attributes["strata.outcome"] = report.outcomeName
        span.attributes["strata.retries"] = report.retryCount
        switch report.outcome {
        case .served(let provenance):
            span.attributes["strata.origin"] = "\(provenance.origin)"
            span.attributes["strata.tier"] = Redaction.redactingSecrets(in: provenance.tier)
            if let age = provenance.age {
                span.attributes["strata.age_ms"] = Int(age.components.seconds * 1000 + age.components.attoseconds / 1_000_000_000_000_000)
            }
        case .failed(let error):
            span.recordError(RedactedError(error))
            span.setStatus(SpanStatus(code: .error, message: Redaction.redactingSecrets(in: "\(error)")))
        case .cancelled:
            break
        }
    }
}

extension TracedLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "traced(\(operationName))", children: [base.chainNode]).observing() }
}

extension Loader {
    /// Wraps every load in a tracing span carrying origin, tier, age, retries and each event.
    ///
    /// ```swift
    /// let feed = chain.traced("load feed")
    /// ```
    /// - Parameters:
    ///   - operationName: the span's name (default `strata.load`).
    ///   - tracer: the tracer; the process's bootstrapped `InstrumentationSystem.tracer` by default.
    public func traced(_ operationName: String = "strata.load", tracer: (any Tracer)? = nil) -> TracedLoader<Self> {
        TracedLoader(base: self, operationName: operationName, tracer: tracer ?? InstrumentationSystem.tracer)
    }
}

/// An error as a span may keep it: its type and its description with secrets redacted, so URLs with
/// credentials or tokens never reach a tracing backend.
struct RedactedError: Error, CustomStringConvertible {
    let type: String
    let description: String

    init(_ error: any Error) {
        type = String(describing: Swift.type(of: error))
        description = Redaction.redactingSecrets(in: "\(error)")
    }
}
