"""duckscore as a dbt package (`duckscore dbt package`): the commands' SQL as dbt models over a
source the user names, the building blocks as dbt macros, rendered from the same templates."""
