package zksession

// CreatedKept is how many creates the wire remembers (see createBook).
const CreatedKept = createdKept
