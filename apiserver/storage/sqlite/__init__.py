"""The SQLite backend, laid out as kine keeps its own: `dialect` (the SQL), `log` (the revision log),
`broadcaster` (changes to watches) and `backend` (the Storage protocol over them)."""
