-- The farm's archive in PostgreSQL (Debian's `postgresql`), run once as the
-- postgres user: runuser -u postgres -- psql -f deploy/postgresql/farm.sql
-- The coordinators create and migrate the tables themselves (a versioned
-- schema, farm_schema_migrations), so the role owns its database.
--
-- Let only the coordinators' machines in, in pg_hba.conf, e.g.
--   host farm farm 10.0.0.0/24 scram-sha-256
-- (the coordinator's client does not speak TLS to PostgreSQL yet: keep the
-- archive on the coordinators' own network). A password goes in the URL,
-- postgres://farm:SECRET@db1:5432/farm, given through the environment
-- (FARM_ARCHIVE in an EnvironmentFile of mode 0600), not the command line;
-- the coordinator's logs name the archive without it.
CREATE ROLE farm LOGIN;
CREATE DATABASE farm OWNER farm;
