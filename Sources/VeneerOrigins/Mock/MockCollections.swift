import Synchronization
import VeneerCore

/// The in-memory collections of the mock origin: items in id order, ids that
/// auto-increment from 1 (or from after the highest seeded id), one lock for all.
final class MockCollections: Sendable {
    struct Collection {
        var items: [String: JSONValue] = [:]
        var order: [String] = []
        var versions: [String: Int] = [:]
        var nextID = 1
    }

    private let state: Mutex<[String: Collection]>

    init(seed: [String: [JSONValue]]) {
        var collections: [String: Collection] = [:]
        for (name, items) in seed {
            var collection = Collection()
            for item in items {
                guard let id = MockCollections.idText(item["id"]) else { continue }
                if collection.items[id] == nil { collection.order.append(id) }
                collection.items[id] = item
                collection.versions[id] = 1
                // A seeded id as large as an Int holds leaves no next one: creating then conflicts.
                if let number = Int(id), number >= collection.nextID { collection.nextID = number == .max ? .max : number + 1 }
            }
            collections[name] = collection
        }
        state = Mutex(collections)
    }

    static func idText(_ value: JSONValue?) -> String? {
        switch value {
        case .number(let text)?: return Int(text).map(String.init)
        case .string(let text)?: return text
        default: return nil
        }
    }

    func list(_ resource: String) -> [JSONValue] {
        state.withLock { collections in
            guard let collection = collections[resource] else { return [] }
            return collection.order.compactMap { collection.items[$0] }
        }
    }

    func get(_ resource: String, id: String) -> (JSONValue, Int)? {
        state.withLock { collections in
            guard let item = collections[resource]?.items[id] else { return nil }
            return (item, collections[resource]?.versions[id] ?? 1)
        }
    }

    /// Stores a new item; its id is the next number, or the body's own string id for
    /// string-id collections. Returns nil when that id is taken.
    func create(_ resource: Resource, _ item: JSONValue) -> (JSONValue, Int)? {
        state.withLock { collections in
            var collection = collections[resource.name] ?? Collection()
            defer { collections[resource.name] = collection }
            let id: String
            let idValue: JSONValue
            if !resource.hasIntegerIDs, let given = item["id"]?.stringValue, resource.canonicalID(Substring(given)) != nil {
                id = given
                idValue = .string(given)
            } else {
                while collection.items[String(collection.nextID)] != nil {
                    guard collection.nextID < .max else { return nil }
                    collection.nextID += 1
                }
                id = String(collection.nextID)
                idValue = resource.hasIntegerIDs ? .int(collection.nextID) : .string(id)
                if collection.nextID < .max { collection.nextID += 1 }
            }
            guard collection.items[id] == nil else { return nil }
            let stored = MockCollections.withID(item, idValue)
            collection.items[id] = stored
            collection.order.append(id)
            collection.versions[id] = 1
            return (stored, 1)
        }
    }

    /// Replaces (PUT) or merges into (PATCH) an existing item; nil when there is none.
    func update(_ resource: Resource, id: String, _ body: JSONValue, merge: Bool) -> (JSONValue, Int)? {
        state.withLock { collections in
            guard var collection = collections[resource.name], let existing = collection.items[id] else { return nil }
            var updated = body
            if merge, case .object(let changes) = body {
                updated = existing
                for (key, value) in changes { updated = updated.setting(key, to: value) }
            }
            updated = MockCollections.withID(updated, existing["id"] ?? (resource.hasIntegerIDs ? .number(id) : .string(id)))
            collection.items[id] = updated
            let version = (collection.versions[id] ?? 1) + 1
            collection.versions[id] = version
            collections[resource.name] = collection
            return (updated, version)
        }
    }

    /// Removes an item; false when there was none.
    func delete(_ resource: String, id: String) -> Bool {
        state.withLock { collections in
            guard var collection = collections[resource], collection.items.removeValue(forKey: id) != nil else { return false }
            collection.order.removeAll { $0 == id }
            collection.versions[id] = nil
            collections[resource] = collection
            return true
        }
    }

    /// `id` first, then the other members in their order.
    static func withID(_ item: JSONValue, _ id: JSONValue) -> JSONValue {
        guard case .object(let members) = item else { return item }
        return .object([("id", id)] + members.filter { $0.0 != "id" })
    }
}
