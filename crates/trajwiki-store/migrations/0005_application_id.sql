-- trajwiki store, schema version 5: the database says whose it is.
--
-- SQLite's application id (a header field) is set to "TWKI", so that trajwiki recognises its
-- own databases before changing anything in them and refuses another program's SQLite file
-- untouched. Stores of earlier versions are recognised by their schema version and tables.
PRAGMA application_id = 1415007049;
