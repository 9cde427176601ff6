mod drain;
