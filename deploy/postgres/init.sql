-- Each service owns its database.
CREATE DATABASE auth;
CREATE DATABASE intake;
