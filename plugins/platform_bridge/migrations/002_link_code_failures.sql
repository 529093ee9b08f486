-- Wrong `/link` codes sent to a bot while each of its codes lives: every wrong code counts against
-- every live code (it could have been a guess at any of them), and a code is burnt once its count
-- reaches [plugins.platform_bridge] link_failures_per_code.
ALTER TABLE bridge_link_codes ADD COLUMN failures integer NOT NULL DEFAULT 0;
