-- Singletons across replicas (issue 23). Every replica runs the same
-- timers; a periodic job (the change-point pass, the nightly schedule,
-- artifact retention, queue notes) runs only in the replica that takes
-- its turn for the period: one row per job, the period last taken, by
-- whom, until when, and whether it finished. A turn whose holder died
-- before finishing can be taken again once its hold lapses.
CREATE TABLE singleton_turns (
    name     TEXT    PRIMARY KEY,
    period   BIGINT  NOT NULL,
    holder   TEXT    NOT NULL,
    until    BIGINT  NOT NULL,
    done     BOOLEAN NOT NULL DEFAULT FALSE
);

-- Pinned cards no runner offers, since when (the bisect's grace runs from
-- it): in the database, so every replica and a restart see the same clock.
CREATE TABLE cards_missing (
    card   TEXT   PRIMARY KEY,
    since  BIGINT NOT NULL
);
