ALTER TABLE sample_notes ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
