CREATE TABLE sample_notes (id serial PRIMARY KEY, text text NOT NULL);
