import HTTPTypes
import VeneerCore

extension ProxyEdge {
    /// Step 3, dispatch: the one place a request meets the chain, the way the chain's plan
    /// says (``ChainPlan``), asked once. An answer the chain has at once (a fresh cache hit)
    /// goes out now, its lease ended; the rest waits, holding the lease: the rest of that
    /// answer, a start by callback (in a task if the chain declines), or a task.
    @inline(__always)
    func dispatch(_ request: ProxyRequest, in admitted: consuming Admitted) -> Start {
        let work: Pending.Work
        switch admitted.lease.chain.plan {
        case .immediate(let handler):
            // Taken apart by move: binding the answer out of the result copied it whole.
            let answer = handler.answerImmediately(request)
            switch consume answer {
            case .answer(let response):
                admitted.lease.end()
                return .answered(finish(request, response))
            case .later(let rest):
                work = .rest(rest, request)
            }
        case .callback(let handler):
            work = .callback(handler, request)
        case .task(let handler):
            work = .task(handler, request)
        }
        return .waiting(Pending(work: work, requestID: admitted.requestID, lease: admitted.lease))
    }

    /// Step 3 for the admin API: a path that streams (``AdminResponder/stream(path:query:headers:)``,
    /// asked for a GET or HEAD) is answered by its stream, which holds no lease (a reload or a
    /// shutdown never waits for it: shutdown ends it); any other waits for the admin API.
    func dispatch(_ call: AdminCall, _ admitted: consuming Admitted) -> Start {
        if call.method == .get || call.method == .head, let stream = admin.stream(path: call.path, query: call.query, headers: call.fields) {
            let requestID = admitted.requestID
            admitted.lease.end()
            return streamed(stream, method: call.method, requestID: requestID)
        }
        return .waiting(Pending(work: .admin(call), requestID: admitted.requestID, lease: admitted.lease))
    }

    /// A stream the admin API gave: its head alone for a HEAD; for a GET the whole stream if
    /// one of the edge's places for streams is free, else 503.
    private func streamed(_ stream: AdminStream, method: HTTPRequest.Method, requestID: String) -> Start {
        let head = Self.stamped(stream.head, requestID)
        guard method == .get else {
            stream.stop()
            return .streamed(StreamedAnswer(head: head, chunks: nil, slots: nil))
        }
        guard streams.take() else {
            stream.stop()
            return .answered(Self.stamped(AdminStreamSlots.busyAnswer(limit: streams.limit), requestID))
        }
        return .streamed(StreamedAnswer(head: head, chunks: stream.chunks, slots: streams))
    }
}
